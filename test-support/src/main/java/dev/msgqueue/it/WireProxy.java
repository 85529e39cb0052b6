package dev.msgqueue.it;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A TCP proxy in front of a PostgreSQL server that reads the server's replies message by message, so a test can cut
 * a connection at an exact point of the protocol: after the server has committed a transaction and before its
 * client hears of it ({@link #cutAfterNextCommit}), which is what a network failure at the wrong moment does. It can
 * also refuse every new connection for a while ({@link #refuseConnections}). The client side is plain text: connect
 * with {@link #jdbcUrl}, which turns TLS and GSS encryption off.
 */
public final class WireProxy implements AutoCloseable {
  private static final Logger log = LoggerFactory.getLogger(WireProxy.class);

  private final String targetHost;
  private final int targetPort;
  private final String database;
  private final ServerSocket listener;
  private final Thread acceptor;
  private final List<Socket> sockets = new CopyOnWriteArrayList<>();
  private final AtomicBoolean cutAfterCommit = new AtomicBoolean();
  private final AtomicInteger cuts = new AtomicInteger();
  private volatile CountDownLatch cut = new CountDownLatch(1);
  private volatile boolean refusing;
  private volatile boolean closed;

  /** A proxy in front of the server of {@code jdbcUrl} (a {@code jdbc:postgresql://host:port/database} URL). */
  public WireProxy(String jdbcUrl) throws IOException {
    URI uri = URI.create(jdbcUrl.substring("jdbc:".length()));
    this.targetHost = uri.getHost();
    this.targetPort = uri.getPort() < 0 ? 5432 : uri.getPort();
    this.database = uri.getPath().substring(1);
    this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
    this.acceptor = new Thread(this::accept, "wire-proxy-accept");
    acceptor.setDaemon(true);
    acceptor.start();
  }

  /** A URL of the proxied database for user {@code postgres}, without TLS or GSS encryption. */
  public String jdbcUrl() {
    return "jdbc:postgresql://127.0.0.1:" + listener.getLocalPort() + "/" + database
        + "?user=postgres&sslmode=disable&gssEncMode=disable";
  }

  /**
   * Cuts the next connection whose server answers a COMMIT: the server has committed, the client is sent nothing more
   * (not the answer) and both sockets close. Once.
   */
  public void cutAfterNextCommit() {
    cut = new CountDownLatch(1);
    cutAfterCommit.set(true);
  }

  /** Waits for the cut {@link #cutAfterNextCommit} asked for. @return whether it happened in time */
  public boolean awaitCut(long timeout, TimeUnit unit) throws InterruptedException {
    return cut.await(timeout, unit);
  }

  /** How many connections were cut after a commit so far. */
  public int cuts() {
    return cuts.get();
  }

  /** While on, every new connection is closed as soon as it is accepted; the open ones are left alone. */
  public void refuseConnections(boolean on) {
    refusing = on;
  }

  @Override
  public void close() throws IOException {
    closed = true;
    listener.close();
    for (Socket socket : sockets) {
      quietly(socket);
    }
  }

  private void accept() {
    while (!closed) {
      Socket client;
      try {
        client = listener.accept();
      } catch (IOException e) {
        if (!closed) {
          log.warn("wire proxy stopped accepting", e);
        }
        return;
      }
      if (refusing) {
        quietly(client);
        continue;
      }
      try {
        Socket server = new Socket();
        server.connect(new InetSocketAddress(targetHost, targetPort));
        client.setTcpNoDelay(true);
        server.setTcpNoDelay(true);
        sockets.add(client);
        sockets.add(server);
        start("wire-proxy-up", () -> pipe(client, server));
        start("wire-proxy-down", () -> pipeReplies(server, client));
      } catch (IOException e) {
        quietly(client);
      }
    }
  }

  private static void start(String name, Runnable body) {
    Thread thread = new Thread(body, name);
    thread.setDaemon(true);
    thread.start();
  }

  /** Client to server: bytes as they come. */
  private void pipe(Socket from, Socket to) {
    byte[] buffer = new byte[8192];
    try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
      int read;
      while ((read = in.read(buffer)) >= 0) {
        out.write(buffer, 0, read);
        out.flush();
      }
    } catch (IOException e) {
      // one side went away
    } finally {
      quietly(from);
      quietly(to);
    }
  }

  /**
   * Server to client, one protocol message at a time (a type byte, then a length that counts itself): forwarded
   * unless it is a CommandComplete for COMMIT while a cut is asked for.
   */
  private void pipeReplies(Socket from, Socket to) {
    try (InputStream in = from.getInputStream();
        OutputStream out = new BufferedOutputStream(to.getOutputStream(), 1 << 16)) {
      while (true) {
        int type = in.read();
        if (type < 0) {
          return;
        }
        byte[] lengthBytes = in.readNBytes(4);
        if (lengthBytes.length < 4) {
          return;
        }
        int length = ((lengthBytes[0] & 0xff) << 24) | ((lengthBytes[1] & 0xff) << 16)
            | ((lengthBytes[2] & 0xff) << 8) | (lengthBytes[3] & 0xff);
        byte[] body = in.readNBytes(length - 4);
        if (type == 'C' && new String(body, StandardCharsets.US_ASCII).startsWith("COMMIT")
            && cutAfterCommit.compareAndSet(true, false)) {
          cuts.incrementAndGet();
          quietly(from);
          quietly(to);
          cut.countDown();
          return;
        }
        out.write(type);
        out.write(lengthBytes);
        out.write(body);
        if (in.available() == 0) {
          out.flush(); // nothing more to read now: the client must see what came so far
        }
      }
    } catch (IOException e) {
      // one side went away
    } finally {
      quietly(from);
      quietly(to);
    }
  }

  private static void quietly(Socket socket) {
    try {
      socket.close();
    } catch (IOException e) {
      // closing anyway
    }
  }
}
