package dev.msgqueue.publish;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.QueueNotFoundException;
import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.publish.Publisher;
import dev.msgqueue.internal.publish.Wakeups;
import dev.msgqueue.internal.sql.QueueStatements;
import dev.msgqueue.internal.support.EventSink;
import dev.msgqueue.internal.support.IntervalThrottle;
import dev.msgqueue.internal.support.QueueContext;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jooq.DSLContext;
import org.jooq.ExecuteListener;
import org.jooq.JSONB;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The publish algorithm on its own: which statements a publish runs, and what its throttles remember. */
@ExtendWith(MsgQueueDatabaseExtension.class)
class PublisherIT {
  private static final Duration NO_DELAY = Duration.ZERO;
  private static final Duration TTL = Duration.ofHours(1);

  private final TestDatabase db;
  private final QueueRows rows;
  private final List<String> statements = new CopyOnWriteArrayList<>();
  private final DSLContext recorded;
  private final MsgQueueConfig config = MsgQueueConfig.builder().wakeupNotifications(false).build();
  private final QueueContext context;
  private final Publisher publisher;

  PublisherIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
    this.recorded = DSL.using(db.dataSource(), SQLDialect.POSTGRES);
    recorded.configuration().set(ExecuteListener.onExecuteStart(ctx -> statements.add(ctx.sql())));
    this.context = new QueueContext(recorded, recorded, config, new EventSink(),
        new IntervalThrottle(config.keepAliveInterval(), config.maxTrackedQueues()));
    this.publisher = new Publisher(context, Wakeups.from(config, context.own()));
  }

  private List<Long> publish(DSLContext ctx, QueueSpec spec, String... payloads) {
    List<JSONB> values = Arrays.stream(payloads).map(JSONB::valueOf).toList();
    return publisher.publish(ctx, spec, values, NO_DELAY, TTL);
  }

  private long count(String start, String fragment) {
    return statements.stream().map(sql -> sql.toLowerCase(Locale.ROOT))
        .filter(sql -> sql.startsWith(start) && sql.contains(fragment)).count();
  }

  /** Keep-alive statements: alone (in a caller's transaction), or inside the autocommit insert. */
  private long keepAliveWrites() {
    return count("", "update \"messagequeue\"");
  }

  private long inserts() {
    return count("", "insert into \"messagequeueitem\"");
  }

  @Test
  void writesTheKeepAliveOncePerIntervalAndThenOnlyInserts() {
    QueueSpec spec = QueueSpec.autoDeleted("pub-keep-alive");
    QueueStatements.bind(db.dsl(), spec);

    for (int i = 0; i < 5; i++) {
      publish(recorded, spec, "{\"n\": " + i + "}");
    }

    assertThat(keepAliveWrites()).as("keep-alive writes").isEqualTo(1);
    assertThat(inserts()).as("inserts").isEqualTo(5);
    assertThat(statements).as("the keep-alive rides in the first insert: one statement per publish").hasSize(5);
    assertThat(count("with \"kept_alive\"", "insert into \"messagequeueitem\"")).isEqualTo(1);
    assertThat(count("insert into", "for key share")).as("autocommit uses the plain insert").isZero();
    assertThat(rows.itemsOf("pub-keep-alive")).isEqualTo(5);
  }

  @Test
  void insideATransactionUsesTheInsertThatCannotRaise23503() {
    QueueSpec spec = QueueSpec.autoDeleted("pub-in-tx");
    QueueStatements.bind(db.dsl(), spec);
    context.keepAlives().done(spec.name());

    try (Session caller = Session.open(db)) {
      DSLContext inTx = caller.dsl().configuration()
          .deriveAppending(ExecuteListener.onExecuteStart(ctx -> statements.add(ctx.sql()))).dsl();
      List<Long> ids = publish(inTx, spec, "1", "2", "3");
      caller.commit();

      assertThat(ids).hasSize(3).isSorted();
      assertThat(count("insert into", "for key share")).isEqualTo(1);
      ids.forEach(id -> assertThat(rows.item(id).getQueueId()).isEqualTo("pub-in-tx"));
    }
  }

  @Test
  void healsAMissingAutoDeletedQueueAndCountsTheHealAsItsKeepAlive() {
    QueueSpec spec = QueueSpec.autoDeleted("pub-heal");

    List<Long> ids = publish(recorded, spec, "\"a\"", "\"b\"");
    statements.clear();
    publish(recorded, spec, "\"c\"");

    assertThat(rows.exists("pub-heal")).isTrue();
    ids.forEach(id -> assertThat(rows.item(id).getQueueId()).isEqualTo("pub-heal"));
    assertThat(keepAliveWrites()).as("no keep-alive right after the heal").isZero();
  }

  @Test
  void aMissingDurableQueueIsNotFoundAndForgotten() {
    QueueSpec spec = QueueSpec.durable("pub-missing");

    assertThatThrownBy(() -> publish(recorded, spec, "{}")).isInstanceOf(QueueNotFoundException.class);

    assertThat(context.keepAlives().trackedKeys()).isZero();
    assertThat(rows.exists("pub-missing")).isFalse();
  }
}
