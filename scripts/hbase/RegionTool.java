// Where the regions of an HBase table are served, and moving them between RegionServers while
// the table is in use (the multi-RegionServer fault test, tests/bulk/test_region_moves.py).
// Thrift has no move call; this is the Java client's Admin, run as a single-file source program:
//   java -cp "<hbase conf>:<hbase jars>/*" scripts/hbase/RegionTool.java servers
//   java -cp ... scripts/hbase/RegionTool.java regions <table>     one line: <encoded> <server>
//   java -cp ... scripts/hbase/RegionTool.java move <table> <n> [--on-stdin]
//       moves n regions, each to the next live server, and prints them; with --on-stdin it
//       connects, prints "ready" and moves once a line arrives on stdin (no JVM start then)
//   java -cp ... scripts/hbase/RegionTool.java spread <table>
//       moves the table's regions from the busiest live server to the idlest until their counts
//       differ by at most one (a RegionServer back from a crash serves nothing until then)
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionLocator;

public class RegionTool {
  public static void main(String[] args) throws Exception {
    try (Connection conn = ConnectionFactory.createConnection(HBaseConfiguration.create());
         Admin admin = conn.getAdmin()) {
      List<ServerName> servers = new ArrayList<>(admin.getRegionServers());
      servers.sort(null);
      switch (args[0]) {
        case "servers":
          for (ServerName s : servers) System.out.println(s);
          break;
        case "regions":
          for (HRegionLocation loc : locations(conn, args[1])) {
            System.out.println(loc.getRegion().getEncodedName() + " " + loc.getServerName());
          }
          break;
        case "move":
          int n = Integer.parseInt(args[2]);
          if (args.length > 3 && args[3].equals("--on-stdin")) {
            locations(conn, args[1]);  // warm: connection, meta lookups
            System.out.println("ready");
            System.out.flush();
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
          }
          for (HRegionLocation loc : locations(conn, args[1])) {
            if (n-- <= 0) break;
            int at = servers.indexOf(loc.getServerName());
            ServerName to = servers.get((at + 1) % servers.size());
            admin.move(loc.getRegion().getEncodedNameAsBytes(), to);
            System.out.println("moved " + loc.getRegion().getEncodedName() + " "
                + loc.getServerName() + " -> " + to);
          }
          break;
        case "spread":
          spread(admin, servers, locations(conn, args[1]));
          break;
        default:
          throw new IllegalArgumentException(
              "servers | regions <table> | move <table> <n> | spread <table>");
      }
    }
  }

  static void spread(Admin admin, List<ServerName> servers, List<HRegionLocation> regions)
      throws Exception {
    Map<ServerName, List<HRegionLocation>> by = new HashMap<>();
    for (ServerName s : servers) by.put(s, new ArrayList<>());
    for (HRegionLocation loc : regions) {
      if (by.containsKey(loc.getServerName())) by.get(loc.getServerName()).add(loc);
    }
    Comparator<ServerName> load = Comparator.comparingInt(s -> by.get(s).size());
    while (true) {
      ServerName from = servers.stream().max(load).get();
      ServerName to = servers.stream().min(load).get();
      if (by.get(from).size() - by.get(to).size() <= 1) break;
      HRegionLocation loc = by.get(from).remove(by.get(from).size() - 1);
      admin.move(loc.getRegion().getEncodedNameAsBytes(), to);
      by.get(to).add(loc);
      System.out.println("moved " + loc.getRegion().getEncodedName() + " " + from + " -> " + to);
    }
  }

  static List<HRegionLocation> locations(Connection conn, String table) throws Exception {
    try (RegionLocator locator = conn.getRegionLocator(TableName.valueOf(table))) {
      return locator.getAllRegionLocations();
    }
  }
}
