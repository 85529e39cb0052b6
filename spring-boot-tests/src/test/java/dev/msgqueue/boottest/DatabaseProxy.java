package dev.msgqueue.boottest;

import dev.msgqueue.it.PostgresServer;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.junit.jupiter.api.extension.AfterAllCallback;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * A TCP relay on 127.0.0.1 in front of the {@link ScratchDatabase}, so a test can take the database away from the
 * service and give it back: {@link #cut()} closes every relayed connection and refuses new ones (as a server that went
 * down), {@link #restore()} accepts again on the same port. Declare it after {@link ScratchDatabase}.
 */
public final class DatabaseProxy implements BeforeAllCallback, AfterAllCallback {
  private static DatabaseProxy current;

  private final Set<Socket> sockets = ConcurrentHashMap.newKeySet();
  private String targetHost;
  private int targetPort;
  private int port;
  private ServerSocket server;

  /** The current test class's relay. */
  static synchronized DatabaseProxy current() {
    if (current == null) {
      throw new IllegalStateException("no database proxy: extend the test class with DatabaseProxy first");
    }
    return current;
  }

  @Override
  public void beforeAll(ExtensionContext context) throws IOException {
    PostgresServer.JdbcUrl target = PostgresServer.JdbcUrl.parse(ScratchDatabase.current().jdbcUrl());
    String[] hostAndPort = target.hostAndPort().split(":");
    targetHost = hostAndPort[0];
    targetPort = hostAndPort.length > 1 ? Integer.parseInt(hostAndPort[1]) : 5432;
    open();
    synchronized (DatabaseProxy.class) {
      current = this;
    }
  }

  @Override
  public void afterAll(ExtensionContext context) {
    cut();
    synchronized (DatabaseProxy.class) {
      current = null;
    }
  }

  /** The scratch database's JDBC URL through this relay. */
  String jdbcUrl() {
    PostgresServer.JdbcUrl target = PostgresServer.JdbcUrl.parse(ScratchDatabase.current().jdbcUrl());
    return new PostgresServer.JdbcUrl("127.0.0.1:" + port, target.database(), target.query()).value();
  }

  /** Closes every relayed connection; new connections are refused until {@link #restore()}. */
  synchronized void cut() {
    closeQuietly(server);
    sockets.forEach(DatabaseProxy::closeQuietly);
    sockets.clear();
  }

  /** Accepts connections again, on the same port. */
  synchronized void restore() throws IOException {
    open();
  }

  private synchronized void open() throws IOException {
    ServerSocket socket = new ServerSocket();
    socket.setReuseAddress(true);
    socket.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
    port = socket.getLocalPort();
    server = socket;
    Thread acceptor = new Thread(() -> accept(socket), "database-proxy-accept");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  private void accept(ServerSocket socket) {
    while (!socket.isClosed()) {
      Socket client;
      try {
        client = socket.accept();
      } catch (IOException closed) {
        return;
      }
      try {
        Socket upstream = new Socket(targetHost, targetPort);
        synchronized (this) {
          if (socket.isClosed()) { // cut while this connection was being set up
            closeQuietly(client);
            closeQuietly(upstream);
            return;
          }
          sockets.add(client);
          sockets.add(upstream);
        }
        relay(client, upstream);
        relay(upstream, client);
      } catch (IOException e) {
        closeQuietly(client);
      }
    }
  }

  private void relay(Socket from, Socket to) {
    Thread thread = new Thread(() -> {
      try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
        in.transferTo(out);
      } catch (IOException ended) {
        // one side closed: close both below
      } finally {
        closeQuietly(from);
        closeQuietly(to);
        sockets.remove(from);
        sockets.remove(to);
      }
    }, "database-proxy-relay");
    thread.setDaemon(true);
    thread.start();
  }

  private static void closeQuietly(AutoCloseable closeable) {
    try {
      if (closeable != null) {
        closeable.close();
      }
    } catch (Exception ignored) {
      // already closed
    }
  }
}
