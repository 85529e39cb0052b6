package dev.msgqueue.internal.maintenance;

import dev.msgqueue.MsgQueueConfig;
import dev.msgqueue.MsgQueueConnectionException;
import dev.msgqueue.internal.sql.MaintenanceStatements;
import dev.msgqueue.internal.sql.SessionSettings;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.jooq.DSLContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The reaper: deletes auto-deleted queues idle for longer than {@link MsgQueueConfig#reapIdleThreshold()} that hold
 * no unexpired message, in batches of {@link MsgQueueConfig#reapBatchSize()}, each batch one short transaction of
 * three statements, none of which ever waits for a lock:
 *
 * <ol>
 *   <li>{@link MaintenanceStatements#lockIdleQueues}: FOR UPDATE SKIP LOCKED on the candidate queue rows. It skips any queue an in-flight
 *       publish (KEY SHARE, taken by the foreign-key check) or keep-alive (NO KEY UPDATE) holds. From here until the
 *       commit no message can be added to a locked queue: its insert needs the KEY SHARE lock this one excludes.
 *   <li>{@link MaintenanceStatements#cleanUpExpiredMessagesOf}: FOR UPDATE SKIP LOCKED on those queues' expired message rows, deleting
 *       them. Rows a consumer holds (a claim, ack or release in flight) are skipped, never waited for.
 *   <li>{@link MaintenanceStatements#deleteEmptyQueues}: deletes those locked queues that no message references at all (the queue rows are
 *       already this transaction's). So the foreign key's {@code ON DELETE SET NULL} has no message row to update and
 *       takes no message-row lock; a queue still referenced (a message a consumer holds, or one committed since step
 *       1's snapshot) is kept and tried again on the next run.
 * </ol>
 *
 * A batch that fails (anything but a lost connection) is retried queue by queue, each in its own transaction, so one
 * queue that cannot be reaped never holds back the others; that queue is logged and left for the next run.
 * Batches are paced to {@link MsgQueueConfig#maintenanceDutyCycle()}.
 */
public final class IdleQueueReaper {
  private static final Logger log = LoggerFactory.getLogger(IdleQueueReaper.class);
  /** How many held-back queues one run remembers (and excludes from its later batches) before it stops. */
  static final int MAX_HELD_BACK = 10_000;

  private final DSLContext ctx;
  private final MsgQueueConfig config;
  private final BatchPacing pacing;

  public IdleQueueReaper(DSLContext ctx, MsgQueueConfig config) {
    this(ctx, config, new BatchPacing(config.maintenanceDutyCycle()));
  }

  IdleQueueReaper(DSLContext ctx, MsgQueueConfig config, BatchPacing pacing) {
    this.ctx = ctx;
    this.config = config;
    this.pacing = pacing;
  }

  /**
   * Runs batches until none is left, or the thread is interrupted between batches.
   *
   * @return the names of the queues deleted
   */
  public List<String> reap() {
    List<String> reaped = new ArrayList<>();
    // Queues chosen in this run but kept (still referenced, or failed): later batches of the run look past them.
    Set<String> heldBack = new HashSet<>();
    while (true) {
      long batchStart = pacing.batchStarts();
      List<String> locked = new ArrayList<>();
      List<String> deleted;
      try {
        deleted = ctx.transactionResult(tx -> {
          SessionSettings.limitLockWaits(tx.dsl(), config.lockTimeout());
          locked.addAll(MaintenanceStatements.lockIdleQueues(
              tx.dsl(), config.reapIdleThreshold(), config.reapBatchSize(), heldBack));
          return deleteLocked(tx.dsl(), locked);
        });
      } catch (MsgQueueConnectionException e) {
        throw e;
      } catch (RuntimeException e) {
        if (locked.isEmpty()) {
          throw e;
        }
        log.warn("a reaper batch of {} queue(s) failed ({}); reaping them one by one", locked.size(), e.toString());
        deleted = reapOneByOne(locked);
      }
      int chosen = locked.size();
      reaped.addAll(deleted);
      locked.removeAll(deleted);
      heldBack.addAll(locked);
      // A short batch means no idle queue is left; a full one may mean more, past the ones held back so far.
      if (chosen < config.reapBatchSize() || heldBack.size() >= MAX_HELD_BACK || !pacing.pauseAfter(batchStart)) {
        break;
      }
    }
    if (!reaped.isEmpty()) {
      log.info("reaped {} idle auto-deleted queue(s)", reaped.size());
      log.debug("reaped queues: {}", reaped);
    }
    if (!heldBack.isEmpty()) {
      log.debug("kept {} idle queue(s) still referenced by messages in use, until the next run", heldBack.size());
    }
    return reaped;
  }

  private List<String> reapOneByOne(List<String> queues) {
    List<String> deleted = new ArrayList<>();
    for (String queue : queues) {
      try {
        deleted.addAll(ctx.transactionResult(tx -> {
          SessionSettings.limitLockWaits(tx.dsl(), config.lockTimeout());
          return deleteLocked(
              tx.dsl(), MaintenanceStatements.lockIdleQueue(tx.dsl(), queue, config.reapIdleThreshold()));
        }));
      } catch (MsgQueueConnectionException e) {
        throw e;
      } catch (RuntimeException e) {
        log.warn("could not reap idle queue \"{}\"; it is tried again on the next run", queue, e);
      }
    }
    return deleted;
  }

  /** Steps 2 and 3 for the queues step 1 locked in this transaction. @return the queues deleted */
  private List<String> deleteLocked(DSLContext tx, List<String> locked) {
    if (locked.isEmpty()) {
      return List.of();
    }
    MaintenanceStatements.cleanUpExpiredMessagesOf(tx, locked, config.cleanupBatchSize());
    return MaintenanceStatements.deleteEmptyQueues(tx, locked);
  }

}
