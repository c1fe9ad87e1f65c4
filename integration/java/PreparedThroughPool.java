// pgjdbc with prepareThreshold=1 through pgsluice: every statement becomes a named server-side
// prepared statement ("S_1", …) from its first use, and later transactions run on whichever
// pooled server is free. Prints "ok <threads>" or exits non-zero.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

public class PreparedThroughPool {
  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    int threads = Integer.parseInt(args[1]);
    int rounds = Integer.parseInt(args[2]);
    String url = "jdbc:postgresql://127.0.0.1:" + port + "/app";
    List<Thread> workers = new ArrayList<>();
    List<Throwable> errors = new ArrayList<>();
    for (int t = 0; t < threads; t++) {
      final int id = t;
      Thread w = new Thread(() -> {
        Properties props = new Properties();
        props.setProperty("user", "app");
        props.setProperty("password", "app");
        props.setProperty("prepareThreshold", "1");
        try (Connection c = DriverManager.getConnection(url, props)) {
          for (int i = 0; i < rounds; i++) {
            try (PreparedStatement ps = c.prepareStatement("SELECT ?::int + ?::int")) {
              ps.setInt(1, id);
              ps.setInt(2, i);
              try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                if (rs.getInt(1) != id + i) throw new IllegalStateException("wrong sum");
              }
            }
            c.setAutoCommit(false);
            try (PreparedStatement ps = c.prepareStatement("SELECT ?::text")) {
              ps.setString(1, "t" + id);
              try (ResultSet rs = ps.executeQuery()) {
                rs.next();
                if (!rs.getString(1).equals("t" + id)) throw new IllegalStateException("wrong");
              }
            }
            c.commit();
            c.setAutoCommit(true);
          }
        } catch (Throwable e) {
          synchronized (errors) {
            errors.add(e);
          }
        }
      });
      workers.add(w);
      w.start();
    }
    for (Thread w : workers) w.join();
    if (!errors.isEmpty()) {
      for (Throwable e : errors) e.printStackTrace();
      System.exit(1);
    }
    System.out.println("ok " + threads);
  }
}
