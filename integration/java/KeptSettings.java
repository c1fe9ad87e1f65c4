// pgjdbc through pgsluice at its defaults (transaction mode, settings kept). pgjdbc sends
// `SET extra_float_digits = 3` and `SET application_name = …` right after every login, which
// under `pin` would hold a server per connection: here more connections than the pool has
// servers all log in and work. Each sets its own search_path and statement_timeout (extended
// protocol: pgjdbc prepares every statement) and runs transactions until they have run on two
// different servers, checking every time that it still sees its own values and pgjdbc's
// extra_float_digits. Prints "ok <connections> <servers seen>" or exits non-zero.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;

public class KeptSettings {
  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    int connections = Integer.parseInt(args[1]);
    int maxRounds = Integer.parseInt(args[2]);
    String url = "jdbc:postgresql://127.0.0.1:" + port + "/app";
    List<Thread> workers = new ArrayList<>();
    List<Throwable> errors = new ArrayList<>();
    int[] seen = new int[connections];
    for (int t = 0; t < connections; t++) {
      final int id = t;
      Thread w = new Thread(() -> {
        Properties props = new Properties();
        props.setProperty("user", "app");
        props.setProperty("password", "app");
        props.setProperty("ApplicationName", "jdbc-" + id);
        try (Connection c = DriverManager.getConnection(url, props);
             Statement st = c.createStatement()) {
          String path = "s" + id + ", public";
          String timeout = (10 + id) + "s";
          st.execute("SET search_path = " + path);
          st.execute("SET statement_timeout = '" + timeout + "'");
          Set<Integer> pids = new HashSet<>();
          for (int i = 0; i < maxRounds && pids.size() < 2; i++) {
            try (ResultSet rs = st.executeQuery(
                     "SELECT current_setting('search_path'), current_setting('statement_timeout'), "
                     + "current_setting('extra_float_digits'), "
                     + "current_setting('application_name'), pg_backend_pid(), pg_sleep(0.002)")) {
              rs.next();
              String got = rs.getString(1) + "|" + rs.getString(2) + "|" + rs.getString(3) + "|"
                  + rs.getString(4);
              String want = path + "|" + timeout + "|3|jdbc-" + id;
              if (!got.equals(want)) {
                throw new IllegalStateException("connection " + id + " round " + i + " saw "
                                                + got + ", wanted " + want);
              }
              pids.add(rs.getInt(5));
            }
          }
          seen[id] = pids.size();
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
      errors.get(0).printStackTrace();
      System.exit(1);
    }
    int least = Integer.MAX_VALUE;
    for (int s : seen) least = Math.min(least, s);
    System.out.println("ok " + connections + " " + least);
  }
}
