package dev.msgqueue.publish;

import static org.assertj.core.api.Assertions.assertThat;

import dev.msgqueue.QueueSpec;
import dev.msgqueue.internal.sql.MaintenanceStatements;
import dev.msgqueue.internal.sql.PublishStatements;
import dev.msgqueue.internal.sql.QueueStatements;
import dev.msgqueue.it.MsgQueueDatabaseExtension;
import dev.msgqueue.it.QueueRows;
import dev.msgqueue.it.Session;
import dev.msgqueue.it.TestDatabase;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import org.jooq.JSONB;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The autocommit publish's insert that carries the queue's keep-alive ({@link
 * PublishStatements#insertItemsKeepingAlive}), interleaved step by step on two connections. Each statement runs in an
 * open transaction, so the locks it took stay held while the other connection runs; a second connection with a
 * {@code lock_timeout} would fail with 55P03 had it waited for any of them.
 */
@ExtendWith(MsgQueueDatabaseExtension.class)
class KeepAliveInInsertIT {
  private static final Duration INTERVAL = Duration.ofMinutes(5);
  private static final Duration TTL = Duration.ofHours(1);
  private static final Duration NO_WAIT = Duration.ofMillis(200);
  private static final List<JSONB> ONE = List.of(JSONB.valueOf("{}"));
  private static final List<JSONB> TWO = List.of(JSONB.valueOf("1"), JSONB.valueOf("2"));

  private final TestDatabase db;
  private final QueueRows rows;

  KeepAliveInInsertIT(TestDatabase db) {
    this.db = db;
    this.rows = new QueueRows(db.dsl());
  }

  private String staleQueue(String name) {
    QueueStatements.bind(db.dsl(), QueueSpec.autoDeleted(name));
    rows.makeIdle(name, Duration.ofHours(1));
    return name;
  }

  @Test
  void writesAStaleRowOnceAndAFreshOneNever() {
    String queue = staleQueue("ka-once");
    String stale = rows.rowVersion(queue);

    PublishStatements.insertItemsKeepingAlive(db.dsl(), queue, ONE, Duration.ZERO, TTL, INTERVAL);
    String written = rows.rowVersion(queue);
    PublishStatements.insertItemsKeepingAlive(db.dsl(), queue, TWO, Duration.ZERO, TTL, INTERVAL);

    assertThat(written).as("the stale row is written").isNotEqualTo(stale);
    assertThat(rows.rowVersion(queue)).as("a row fresher than the interval is not written again").isEqualTo(written);
    assertThat(rows.itemsOf(queue)).isEqualTo(3);
  }

  @Test
  void twoKeepAliveInsertsOfOneQueueNeverWaitForEachOther() {
    String queue = staleQueue("ka-two");

    try (Session first = Session.open(db); Session second = Session.open(db).lockTimeout(NO_WAIT)) {
      // The first writes the row and holds it FOR NO KEY UPDATE until it commits.
      PublishStatements.insertItemsKeepingAlive(first.dsl(), queue, ONE, Duration.ZERO, TTL, INTERVAL);
      String writtenByFirst = new QueueRows(first.dsl()).rowVersion(queue);
      // The second skips the held row (SKIP LOCKED) and its insert's KEY SHARE does not conflict with it.
      List<Long> ids = PublishStatements.insertItemsKeepingAlive(
          second.dsl(), queue, TWO, Duration.ZERO, TTL, INTERVAL);
      second.commit();
      first.commit();

      assertThat(ids).hasSize(2);
      assertThat(rows.rowVersion(queue)).as("only the first wrote the row").isEqualTo(writtenByFirst);
      assertThat(rows.itemsOf(queue)).isEqualTo(3);
    }
  }

  @Test
  void aKeepAliveInsertDoesNotWaitForAnUncommittedPlainPublishNorTheOtherWayRound() {
    String queue = staleQueue("ka-plain");

    try (Session plain = Session.open(db); Session keepingAlive = Session.open(db).lockTimeout(NO_WAIT)) {
      PublishStatements.insertItems(plain.dsl(), queue, ONE, Duration.ZERO, TTL);
      // KEY SHARE held by the plain insert: the keep-alive's FOR NO KEY UPDATE is compatible and writes the row.
      PublishStatements.insertItemsKeepingAlive(keepingAlive.dsl(), queue, ONE, Duration.ZERO, TTL, INTERVAL);
      try (Session later = Session.open(db).lockTimeout(NO_WAIT)) {
        // And a plain publish arriving while the keep-alive's update is uncommitted does not wait for it.
        PublishStatements.insertItems(later.dsl(), queue, ONE, Duration.ZERO, TTL);
        later.commit();
      }
      keepingAlive.commit();
      plain.commit();
    }
    assertThat(rows.itemsOf(queue)).isEqualTo(3);
  }

  @Test
  void theReaperSkipsAQueueWhoseKeepAliveInsertIsInFlight() {
    String queue = staleQueue("ka-reap");
    rows.makeIdle(queue, Duration.ofDays(1));

    try (Session publisher = Session.open(db); Session reaper = Session.open(db).lockTimeout(NO_WAIT)) {
      PublishStatements.insertItemsKeepingAlive(publisher.dsl(), queue, ONE, Duration.ZERO, TTL, INTERVAL);
      // The reaper's snapshot still sees the queue idle; its FOR UPDATE SKIP LOCKED passes over the held row.
      assertThat(MaintenanceStatements.lockIdleQueues(reaper.dsl(), Duration.ofHours(2), 10, Set.of()))
          .doesNotContain(queue);
      reaper.rollback();
      publisher.commit();
    }
    assertThat(rows.exists(queue)).isTrue();
    assertThat(rows.itemsOf(queue)).isEqualTo(1);
  }
}
