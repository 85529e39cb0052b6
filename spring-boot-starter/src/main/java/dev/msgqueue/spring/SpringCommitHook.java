package dev.msgqueue.spring;

import dev.msgqueue.CommitHook;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.transaction.support.TransactionSynchronizationManager;

/**
 * Spring's transactions for {@link CommitHook}: inside a Spring-managed transaction (an {@code @Transactional}
 * method, a {@code TransactionTemplate}), an action runs after that transaction commits and never when it rolls back;
 * outside one (autocommit), at once.
 */
final class SpringCommitHook implements CommitHook {
  @Override
  public void afterCommit(Runnable action) {
    // An actual transaction, not only synchronization: a SUPPORTS scope without one publishes in autocommit.
    if (TransactionSynchronizationManager.isSynchronizationActive()
        && TransactionSynchronizationManager.isActualTransactionActive()) {
      TransactionSynchronizationManager.registerSynchronization(new TransactionSynchronization() {
        @Override
        public void afterCommit() {
          action.run();
        }
      });
    } else {
      action.run();
    }
  }
}
