// pgjdbc through pgsluice at its defaults (transaction mode, SQL PREPARE kept): each connection
// PREPAREs a statement of the same name with its own text and EXECUTEs it until its transactions
// have run on two different servers, checking every time that it gets its own statement's
// result; then PostgreSQL's 26000 for a name never prepared and 42P05 for a name in use, and
// DEALLOCATE. args: port, connections, max rounds, and pgjdbc's preferQueryMode (default
// "extended": every statement a Parse). Prints "ok <connections> <servers seen>" or exits
// non-zero.
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Properties;
import java.util.Set;

public class SqlPrepareThroughPool {
  static void expectError(Statement st, String sql, String state) throws SQLException {
    try {
      st.execute(sql);
    } catch (SQLException e) {
      if (state.equals(e.getSQLState())) return;
      throw new IllegalStateException(sql + ": " + e.getSQLState() + " " + e.getMessage()
                                      + ", wanted " + state);
    }
    throw new IllegalStateException(sql + ": no error, wanted " + state);
  }

  public static void main(String[] args) throws Exception {
    int port = Integer.parseInt(args[0]);
    int connections = Integer.parseInt(args[1]);
    int maxRounds = Integer.parseInt(args[2]);
    String mode = args.length > 3 ? args[3] : "extended";
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
        props.setProperty("preferQueryMode", mode);
        try (Connection c = DriverManager.getConnection(url, props);
             Statement st = c.createStatement()) {
          st.execute("PREPARE p (int) AS SELECT 'conn" + id + ":' || $1, pg_backend_pid(), "
                     + "pg_sleep(0.002)");
          Set<Integer> pids = new HashSet<>();
          for (int i = 0; i < maxRounds && (pids.size() < 2 || i < 10); i++) {
            try (ResultSet rs = st.executeQuery("EXECUTE p(" + i + ")")) {
              rs.next();
              String want = "conn" + id + ":" + i;
              if (!want.equals(rs.getString(1))) {
                throw new IllegalStateException("connection " + id + " round " + i + " got "
                                                + rs.getString(1) + ", wanted " + want);
              }
              pids.add(rs.getInt(2));
            }
          }
          expectError(st, "EXECUTE never_prepared", "26000");
          expectError(st, "PREPARE p AS SELECT 1", "42P05");
          st.execute("DEALLOCATE p");
          expectError(st, "EXECUTE p(1)", "26000");
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
