// pgjdbc LISTEN through pgsluice's relay: one connection listens and then only polls
// getNotifications(timeout) (no query of its own) while another sends NOTIFYs. Prints
// "ok <payloads in order>", or exits non-zero (also when a notification does not carry the pid
// of the backend that sent it).
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import org.postgresql.PGConnection;
import org.postgresql.PGNotification;

public class ListenThroughPool {
  public static void main(String[] args) throws Exception {
    String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/app";
    int count = Integer.parseInt(args[1]);
    try (Connection listener = DriverManager.getConnection(url, "app", "app");
        Connection sender = DriverManager.getConnection(url, "app", "app")) {
      try (Statement s = listener.createStatement()) {
        s.execute("LISTEN jdbc_jobs");
      }
      // Each NOTIFY in a transaction that reads the sending backend's pid: the pid its
      // notification must carry.
      List<Integer> senderPids = new ArrayList<>();
      sender.setAutoCommit(false);
      try (Statement s = sender.createStatement()) {
        for (int i = 0; i < count; i++) {
          s.execute("NOTIFY jdbc_jobs, '" + i + "'");
          try (ResultSet r = s.executeQuery("SELECT pg_backend_pid()")) {
            r.next();
            senderPids.add(r.getInt(1));
          }
          sender.commit();
        }
      }
      PGConnection pg = listener.unwrap(PGConnection.class);
      List<String> got = new ArrayList<>();
      List<Integer> pids = new ArrayList<>();
      long deadline = System.currentTimeMillis() + 5000;
      while (got.size() < count && System.currentTimeMillis() < deadline) {
        PGNotification[] ns = pg.getNotifications(200);
        if (ns == null) continue;
        for (PGNotification n : ns) {
          got.add(n.getParameter());
          pids.add(n.getPID());
        }
      }
      if (!pids.equals(senderPids.subList(0, pids.size()))) {
        System.err.println("sender pids " + pids + " where the senders were " + senderPids);
        System.exit(1);
      }
      System.out.println("ok " + String.join(",", got));
    }
  }
}
