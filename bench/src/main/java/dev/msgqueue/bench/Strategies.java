package dev.msgqueue.bench;

import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE;
import static dev.msgqueue.jooq.Tables.MESSAGE_QUEUE_ITEM;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.select;
import static org.jooq.impl.DSL.val;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueRepository;
import dev.msgqueue.PublishOptions;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.TransactionalQueue;
import dev.msgqueue.internal.publish.Payloads;
import dev.msgqueue.internal.sql.PublishStatements;
import dev.msgqueue.jooq.tables.MessageQueue;
import dev.msgqueue.jooq.tables.MessageQueueItem;
import java.io.StringReader;
import java.time.Duration;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Function;
import org.jooq.CommonTableExpression;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.JSONB;
import org.jooq.Record1;
import org.jooq.exception.DataAccessException;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

/**
 * The publish strategies the benchmark compares. All insert the same payload with the same {@code "readAfter"} and
 * {@code "expiresAt"} expressions and fetch the new id ({@code RETURNING}), as msgqueue's publish does.
 */
final class Strategies {
  static final String UPSERT_PER_PUBLISH = "upsert-per-publish";
  static final String OPTIMISTIC_HEAL = "optimistic-heal";
  static final String MSGQUEUE = "msgqueue";
  static final String MSGQUEUE_UNCOALESCED = "msgqueue-uncoalesced";
  static final String NO_FK_CEILING = "no-fk-ceiling";
  /** The order of the report's columns and rows. */
  static final List<String> CONTENTION_ORDER =
      List.of(UPSERT_PER_PUBLISH, OPTIMISTIC_HEAL, MSGQUEUE_UNCOALESCED, MSGQUEUE, NO_FK_CEILING);

  /** The SQLSTATE of a foreign-key violation: the item's queue row does not exist. */
  static final String FOREIGN_KEY_VIOLATION = "23503";

  private static final MessageQueue Q = MESSAGE_QUEUE;
  private static final MessageQueueItem I = MESSAGE_QUEUE_ITEM;

  private Strategies() { }

  /** What every strategy publishes: one payload, to one queue, with one time to live. */
  record Message(QueueSpec queue, JSONB payload, Duration ttl) { }

  /**
   * The upsert design: every publish upserts the queue row, setting
   * {@code "lastActive"}, and inserts the item, in one statement. The upsert takes the row's exclusive lock, so
   * concurrent publishers to one queue serialize on it.
   */
  static PublishStrategy upsertPerPublish(Message message) {
    return strategy(UPSERT_PER_PUBLISH, ctx -> () -> {
      ensureQueueAndInsert(ctx, message);
      return 1;
    });
  }

  /**
   * Optimistic insert: a plain insert (the foreign-key check takes only KEY SHARE on the queue row); on 23503, and
   * only then, the upsert-and-insert statement above. It never refreshes {@code "lastActive"} otherwise: no keep-alive.
   *
   * @param heals counts the publishes that took the heal path
   */
  static PublishStrategy optimisticHeal(Message message, AtomicLong heals) {
    return strategy(OPTIMISTIC_HEAL, ctx -> () -> {
      try {
        plainInsert(ctx, I, message);
      } catch (DataAccessException e) {
        if (!FOREIGN_KEY_VIOLATION.equals(e.sqlState())) {
          throw e;
        }
        heals.incrementAndGet();
        ensureQueueAndInsert(ctx, message);
      }
      return 1;
    });
  }

  /**
   * This project's publish path as a service uses it, {@link MsgQueueRepository#publish} on a repository over a
   * connection pool ({@code pooledRepository}), with publish coalescing on (the default): concurrent publishes share
   * statements and commits. The publisher's own connection is left idle.
   */
  static PublishStrategy msgqueue(Message message, MsgQueueRepository pooledRepository) {
    PublishOptions options = PublishOptions.defaults().withTtl(message.ttl());
    return strategy(MSGQUEUE, ctx -> () -> {
      pooledRepository.publish(message.queue(), message.payload(), options);
      return 1;
    });
  }

  /**
   * This project's publish path without coalescing, {@link MsgQueueRepository#publish}: payload validation, the
   * KEY SHARE insert, the throttled keep-alive and the heal, one statement per publish. All publishers share
   * {@code repository} (as all threads of one service do: its keep-alive throttle is per repository), each through a
   * view on its own autocommit connection (views never coalesce).
   */
  static PublishStrategy msgqueueUncoalesced(Message message, MsgQueueRepository repository) {
    return msgqueueUncoalesced(MSGQUEUE_UNCOALESCED, message, repository);
  }

  /** {@link #msgqueueUncoalesced(Message, MsgQueueRepository)} reported under {@code id}. */
  static PublishStrategy msgqueueUncoalesced(String id, Message message, MsgQueueRepository repository) {
    PublishOptions options = PublishOptions.defaults().withTtl(message.ttl());
    return strategy(id, ctx -> {
      TransactionalQueue onThisConnection = repository.inTransaction(ctx);
      return () -> {
        onThisConnection.publish(message.queue(), message.payload(), options);
        return 1;
      };
    });
  }

  /**
   * The physical ceiling: the same plain insert into {@link BenchDatabase#ITEM_WITHOUT_FK}, the same columns and
   * indexes without the foreign key, so no parent row is read or locked at all.
   */
  static PublishStrategy noFkCeiling(Message message) {
    return strategy(NO_FK_CEILING, ctx -> () -> {
      plainInsert(ctx, BenchDatabase.ITEM_WITHOUT_FK, message);
      return 1;
    });
  }

  /** {@link MsgQueueRepository#publishBatch} with {@code batchSize} copies of the payload per call. */
  static PublishStrategy msgqueueBatch(Message message, MsgQueueRepository repository, int batchSize) {
    PublishOptions options = PublishOptions.defaults().withTtl(message.ttl());
    List<String> batch = Collections.nCopies(batchSize, message.payload().data());
    return strategy("msgqueue-batch-" + batchSize, ctx -> {
      TransactionalQueue onThisConnection = repository.inTransaction(ctx);
      return () -> onThisConnection.publishBatch(message.queue(), batch, options).size();
    });
  }

  /**
   * What {@link MsgQueueRepository#publishBatch} runs in autocommit below its COPY size: the payload check, then one
   * {@code INSERT ... SELECT ... FROM unnest(...)} of the batch ({@link PublishStatements#insertItems}), without the
   * keep-alive, heal and wake-up around it. Beside publishBatch at 100 and more, it is what the COPY replaced.
   */
  static PublishStrategy insertBatch(Message message, MsgQueueConfig config, int batchSize) {
    Payloads payloads = new Payloads(config.maxPayloadBytes());
    List<String> batch = Collections.nCopies(batchSize, message.payload().data());
    return strategy("insert-batch-" + batchSize, ctx -> () -> PublishStatements.insertItems(ctx,
        message.queue().name(), payloads.validateAll(batch, MsgQueueRepository.MAX_BATCH_SIZE), Duration.ZERO,
        message.ttl()).size());
  }

  /**
   * pgjdbc's COPY of {@code batchSize} copies of the message, as a bulk sender without msgqueue would do it:
   * {@code COPY "MessageQueueItem"("payload", "readAfter", "expiresAt", "queueId") FROM STDIN}, timestamps computed on
   * the client in UTC. It returns no ids and has no heal: a missing queue fails the whole COPY with 23503.
   */
  static PublishStrategy copyBatch(Message message, int batchSize) {
    String sql = "COPY \"" + I.getName() + "\"(\"" + I.PAYLOAD.getName() + "\", \"" + I.READ_AFTER.getName() + "\", \""
        + I.EXPIRES_AT.getName() + "\", \"" + I.QUEUE_ID.getName() + "\") FROM STDIN";
    String payload = copyText(message.payload().data());
    String queue = copyText(message.queue().name());
    return strategy("copy-" + batchSize, ctx -> () -> ctx.connectionResult(connection -> {
      CopyManager copy = connection.unwrap(PGConnection.class).getCopyAPI();
      LocalDateTime now = LocalDateTime.now(ZoneOffset.UTC);
      String rowSuffix = "\t" + now + "\t" + now.plus(message.ttl()) + "\t" + queue + "\n";
      StringBuilder rows = new StringBuilder(batchSize * (payload.length() + rowSuffix.length()));
      for (int i = 0; i < batchSize; i++) {
        rows.append(payload).append(rowSuffix);
      }
      return (int) copy.copyIn(sql, new StringReader(rows.toString()));
    }));
  }

  /**
   * The leading peer's batch send ({@link PgmqShape#SEND_BATCH_SQL}) of {@code batchSize} copies of the payload into
   * its table of pgmq's shape (no foreign key, one index besides the key): the ids come back, as from publishBatch.
   */
  static PublishStrategy pgmqSendBatch(Message message, int batchSize) {
    String[] batch = Collections.nCopies(batchSize, message.payload().data()).toArray(new String[0]);
    return strategy("pgmq-send-batch-" + batchSize,
        ctx -> () -> ctx.connectionResult(connection -> PgmqShape.sendBatch(connection, batch)));
  }

  /** A value in COPY's text format: backslash, tab, newline and carriage return escaped. */
  private static String copyText(String value) {
    return value.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r");
  }

  private static long plainInsert(DSLContext ctx, MessageQueueItem table, Message message) {
    return ctx.insertInto(table, table.PAYLOAD, table.READ_AFTER, table.EXPIRES_AT, table.QUEUE_ID)
        .values(val(message.payload()), BenchSql.utcNow(), BenchSql.utcNowPlus(message.ttl()),
            val(message.queue().name()))
        .returning(table.ID)
        .fetchOne(table.ID);
  }

  /** The atomic ensure-queue statement: upsert the queue row (refreshing "lastActive"), insert the item from it. */
  static long ensureQueueAndInsert(DSLContext ctx, Message message) {
    QueueSpec spec = message.queue();
    CommonTableExpression<Record1<String>> ensured = name("ensured").fields(Q.NAME.getName())
        .as(ctx.insertInto(Q)
            .set(Q.NAME, spec.name())
            .set(Q.DURABLE, spec.durable())
            .set(Q.AUTO_DELETED, spec.autoDeleted())
            .set(Q.EXCLUSIVE, spec.exclusive())
            .set(Q.EXCLUSIVE_CONSUMER_ID, spec.exclusiveConsumerId())
            .set(Q.LAST_ACTIVE, BenchSql.utcNow())
            .onConflict(Q.NAME)
            .doUpdate()
            .set(Q.LAST_ACTIVE, BenchSql.utcNow())
            .returningResult(Q.NAME));
    Field<String> ensuredName = ensured.field(Q.NAME.getName(), String.class);
    return ctx.with(ensured)
        .insertInto(I, I.PAYLOAD, I.READ_AFTER, I.EXPIRES_AT, I.QUEUE_ID)
        .select(select(val(message.payload()), BenchSql.utcNow(), BenchSql.utcNowPlus(message.ttl()), ensuredName)
            .from(ensured))
        .returning(I.ID)
        .fetchOne(I.ID);
  }

  private static PublishStrategy strategy(String id, Function<DSLContext, PublishStrategy.Publisher> open) {
    return new PublishStrategy() {
      @Override
      public String id() {
        return id;
      }

      @Override
      public Publisher open(DSLContext publisherContext) {
        return open.apply(publisherContext);
      }
    };
  }
}
