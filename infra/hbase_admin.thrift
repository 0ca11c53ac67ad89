// The slice of HBase's Thrift2 service (THBaseService) that Missive's hbase_init needs: creating a
// table with split keys, which the Thrift1 API happybase speaks cannot do. Field ids match
// org/apache/hadoop/hbase/thrift2/hbase.thrift of HBase 2.x; Thrift skips the fields left out.

enum TBloomFilterType {
  NONE = 0,
  ROW = 1,
  ROWCOL = 2,
}

enum TDataBlockEncoding {
  NONE = 0,
  PREFIX = 2,
  DIFF = 3,
  FAST_DIFF = 4,
}

struct TTableName {
  1: optional binary ns
  2: required binary qualifier
}

struct TColumnFamilyDescriptor {
  1: required binary name
  5: optional TBloomFilterType bloomnFilterType
  8: optional TDataBlockEncoding dataBlockEncoding
  10: optional i32 maxVersions
  13: optional i32 timeToLive
}

struct TTableDescriptor {
  1: required TTableName tableName
  2: optional list<TColumnFamilyDescriptor> columns
}

exception TIOError {
  1: optional string message
  2: optional bool canRetry
}

service THBaseService {
  bool tableExists(1: TTableName tableName) throws (1: TIOError io)
  void createTable(1: required TTableDescriptor desc, 2: optional list<binary> splitKeys)
    throws (1: TIOError io)
}
