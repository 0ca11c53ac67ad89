// Flushes an HBase table's memstores and major-compacts it, waiting until the compaction is over,
// so the bytes its store files take on disk can be measured (scripts/measure_capacity.py).
// Thrift has no flush call; this is the Java client's Admin, run as a single-file source program:
//   java -cp "<hbase conf>:<hbase jars>/*" scripts/hbase/TableFiles.java <table>
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.CompactionState;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;

public class TableFiles {
  public static void main(String[] args) throws Exception {
    TableName table = TableName.valueOf(args[0]);
    try (Connection conn = ConnectionFactory.createConnection(HBaseConfiguration.create());
         Admin admin = conn.getAdmin()) {
      admin.flush(table);
      admin.majorCompact(table);
      long deadline = System.currentTimeMillis() + 300_000;
      Thread.sleep(1000);
      while (admin.getCompactionState(table) != CompactionState.NONE) {
        if (System.currentTimeMillis() > deadline) throw new RuntimeException("compaction still running after 300 s");
        Thread.sleep(500);
      }
      System.out.println("flushed and compacted " + table);
    }
  }
}
