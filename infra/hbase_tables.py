"""Missive's HBase tables (DESIGN.md) and their idempotent, pre-split creation.

- ``inbox``    family ``d`` (1 version, ROW bloom, FAST_DIFF: rowkeys share long prefixes)
- ``convlist`` family ``c`` (1 version): the second-level cache of conversation lists
- ``group_timeline`` family ``d`` (1 version): one timeline per group, rowkey salt|gid|~seq

All are pre-split on the salt byte into 16 regions (split keys 0x01 .. 0x0f), so writes spread
over every RegionServer from the first second. Thrift1 (happybase) cannot pass split keys, so
creation goes through the Thrift2 gateway (HBASE_THRIFT2_PORT), driven by thriftpy2 from a
minimal IDL (infra/hbase_admin.thrift).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import thriftpy2
from thriftpy2.rpc import make_client

from infra import hbase

SALT_SPLITS = [bytes([i]) for i in range(1, 16)]


@dataclass(frozen=True)
class TableSpec:
    name: str
    family: str


TABLES = (TableSpec("inbox", "d"), TableSpec("convlist", "c"), TableSpec("group_timeline", "d"))

_idl = thriftpy2.load(
    str(Path(__file__).with_name("hbase_admin.thrift")), module_name="hbase_admin_thrift"
)


def _client() -> Any:
    opts = hbase.options()
    return make_client(_idl.THBaseService, opts["HOST"], opts["THRIFT2_PORT"], timeout=120_000)


full_name = hbase.full_name


def ensure_tables() -> list[str]:
    """Create every missing table; returns the names created (empty when all existed)."""
    client = _client()
    created = []
    try:
        for spec in TABLES:
            table = _idl.TTableName(qualifier=full_name(spec.name))
            if client.tableExists(table):
                continue
            client.createTable(_descriptor(table, spec), SALT_SPLITS)
            created.append(full_name(spec.name).decode())
    finally:
        client.close()
    return created


def _descriptor(table: Any, spec: TableSpec) -> Any:
    family = _idl.TColumnFamilyDescriptor(
        name=spec.family.encode(),
        maxVersions=1,
        bloomnFilterType=_idl.TBloomFilterType.ROW,
        dataBlockEncoding=_idl.TDataBlockEncoding.FAST_DIFF,
    )
    return _idl.TTableDescriptor(tableName=table, columns=[family])
