"""Target ``log_recovery``: a broker restarting on a log directory in which one file lies.

A base log directory is written once per process by a LogManager (one partition, ``t-0``:
two segments with their offset, time and transaction indexes, an idempotent gzip batch, an
aborted and a committed transaction, producer-state snapshots, a leader-epoch checkpoint,
``partition.metadata``, the three offset checkpoints and ``meta.properties``).

Input: a byte choosing the file (by index in the sorted list of the base's files), a flags
byte, then how the file changes.  Flags: bit 0 keep the clean-shutdown marker (else the broker
recovers, as after a crash); bit 1 reset the recovery point to 0 first (a crash before any
flush), so recovery re-scans every segment; bit 2 the rest of the input is the file's new
content (empty: a file cut to nothing).  Without bit 2 the rest damages the file as it is: a
big-endian uint16 where to cut it (past its end: not cut), then 3-byte patches, each a uint16
position (modulo the file's size) and a byte XORed into it; small inputs then stand for
torn tails and flipped bytes of whole files, which libFuzzer mutates best.

Entry: ``LogManager.startup`` on a copy of the base with that file replaced, as the broker
opens its log directories, then ``check_and_write_meta_properties``; then the partition's
log is read back whole with ``Log.read`` and a batch is appended and read back.

Property: opening raises nothing (``check_and_write_meta_properties`` may refuse with
``InconsistentBrokerMetadataError``, which stops the broker with a message), and the directory
stays online and holds the partition.  After a crash with the recovery point at 0 (every
segment re-scanned) reads return whole batches with valid CRCs in increasing offsets, every
original batch before the first changed byte of a segment file is kept, the whole log is kept
when the file changed is not a segment, and a batch appended is served.  Files the broker
trusts (after a clean shutdown, as Kafka) are served as they are: reads and appends may fail
only with a ``KafkaError`` (an error code in the answer), never another exception.
"""

from __future__ import annotations

import functools
import os
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path

from odradek.config import LogConfig
from odradek.log.checkpoints import RECOVERY_POINT_CHECKPOINT, OffsetCheckpointFile
from odradek.log.log import Log
from odradek.log.log_info import AppendOrigin
from odradek.log.log_manager import CLEAN_SHUTDOWN_FILE, LogManager, LogManagerConfig
from odradek.log.meta_properties import InconsistentBrokerMetadataError
from odradek.log.segment import LOG_SUFFIX
from odradek.protocol.control_records import ControlRecordType, build_end_txn_marker_batch
from odradek.protocol.errors import KafkaError
from odradek.protocol.records import (
    CompressionType,
    SimpleRecord,
    build_batch,
    check_crc,
    iter_batches,
)

ALLOWED_FROM_META_PROPERTIES = (InconsistentBrokerMetadataError,)
ALLOWED_FROM_TRUSTED_READS = (KafkaError,)

NOW_MS = 1_700_000_000_000
TOPIC, PARTITION = "t", 0
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
BROKER_ID, CLUSTER_ID = 0, "fuzz-cluster-id"
CLEAN, RECOVER_FROM_ZERO, REPLACE = 1, 2, 4
_READ_BYTES = 1 << 20
_U16 = struct.Struct(">H")
_PATCH = struct.Struct(">HB")
_CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=64)
# tmpfs when there is one: every input copies and fsyncs a few files.
_SCRATCH = "/dev/shm" if os.path.isdir("/dev/shm") else None


@dataclass(frozen=True)
class BaseLog:
    files: tuple[str, ...]  # paths relative to root, the input's first byte indexes them
    contents: dict[str, bytes]  # every file's bytes (the lock and the clean-shutdown marker too)
    end_offset: int
    # per segment file: (end position, next offset) of each batch, in order
    batches: dict[str, tuple[tuple[int, int], ...]]


def test_one_input(data: bytes) -> None:
    if len(data) < 2:
        return
    base = base_log()
    chosen = base.files[data[0] % len(base.files)]
    flags = data[1]
    content = data[2:] if flags & REPLACE else damaged(base.contents[chosen], data[2:])
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as scratch:
        root = Path(scratch) / "logs"
        for name, original in base.contents.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(original)
        if flags & RECOVER_FROM_ZERO:
            OffsetCheckpointFile(root / RECOVERY_POINT_CHECKPOINT).write({(TOPIC, PARTITION): 0})
        (root / chosen).write_bytes(content)
        if not flags & CLEAN:
            (root / CLEAN_SHUTDOWN_FILE).unlink()
        strict = not flags & CLEAN and flags & RECOVER_FROM_ZERO and chosen != RECOVERY_POINT_CHECKPOINT
        manager = _manager(root)
        manager.startup()
        try:
            manager.check_and_write_meta_properties(BROKER_ID, CLUSTER_ID)
        except ALLOWED_FROM_META_PROPERTIES:
            pass
        try:
            assert manager.live_log_dirs == [root.resolve()], f"log dir went offline after changing {chosen}"
            lg = manager.get_log(TOPIC, PARTITION)
            assert lg is not None, f"partition lost after changing {chosen}"
            if strict:
                _read_back(lg, recovered=True)
                _check_kept(base, chosen, content, lg)
                _append_and_read(lg)
            else:
                # Trusted files (a clean shutdown, or segments before the recovery point) are
                # trusted as Kafka trusts them: an index that passes Kafka's O(1) sanity check
                # but points inside a batch makes reads fail with a KafkaError (an error code in
                # the Fetch answer), as it makes Kafka's fail; a batch's offset changed (outside
                # its CRC) is served as it is.
                try:
                    _read_back(lg, recovered=False)
                    _append_and_read(lg)
                except ALLOWED_FROM_TRUSTED_READS:
                    pass
        finally:
            manager.shutdown()


def damaged(original: bytes, damage: bytes) -> bytes:
    """``original`` cut and patched as ``damage`` says (see the module docstring)."""
    content = bytearray(original)
    if len(damage) >= 2:
        del content[_U16.unpack_from(damage)[0]:]
    for at in range(2, len(damage) - 2, 3):
        if content:
            position, xor = _PATCH.unpack_from(damage, at)
            content[position % len(content)] ^= xor
    return bytes(content)


def _manager(root: Path) -> LogManager:
    return LogManager(LogManagerConfig(log_dirs=(str(root),)), _CONFIG, time_ms=lambda: NOW_MS)


def _read_back(lg: Log, *, recovered: bool) -> None:
    """Read the whole log; a ``recovered`` one must hold valid batches in increasing offsets."""
    offset, end = lg.log_start_offset, lg.log_end_offset
    while offset < end:
        data = lg.read(offset, _READ_BYTES).read_bytes()
        assert data or not recovered, f"nothing read at offset {offset} below the log end offset {end}"
        last = offset - 1
        for pos, header in iter_batches(data):
            if recovered:
                check_crc(data, pos, header)
            elif header.last_offset <= last:
                return  # a trusted segment whose offsets lie: served as it is, as Kafka does
            assert header.last_offset > last, f"offsets go back at {header.base_offset} (after {last})"
            last = header.last_offset
        if last < offset:
            return  # (not recovered) nothing more is served
        offset = last + 1


def _check_kept(base: BaseLog, chosen: str, content: bytes, lg: Log) -> None:
    if chosen not in base.batches:
        assert lg.log_end_offset == base.end_offset, (
            f"changing {chosen} cut the log from {base.end_offset} to {lg.log_end_offset}")
        return
    original = base.contents[chosen]
    first_change = next((i for i, (a, b) in enumerate(zip(original, content, strict=False)) if a != b),
                        min(len(original), len(content)))
    kept = [next_offset for end, next_offset in base.batches[chosen] if end <= first_change]
    if kept:
        assert lg.log_end_offset >= kept[-1], (
            f"recovery of {chosen} dropped batches before its first changed byte {first_change}: "
            f"log end {lg.log_end_offset}, expected at least {kept[-1]}")


def _append_and_read(lg: Log) -> None:
    epoch = max(lg.latest_epoch or 0, 0)
    batch = build_batch([SimpleRecord(b"after-recovery", b"k")], timestamp=NOW_MS)
    info = lg.append_as_leader(batch, epoch)
    data = lg.read(info.first_offset, _READ_BYTES).read_bytes()
    found = [h for _, h in iter_batches(data) if h.base_offset == info.first_offset]
    assert found, f"the batch appended at {info.first_offset} is not served"


@functools.cache
def base_log() -> BaseLog:
    """The base log directory's files (made once per process, in memory)."""
    with tempfile.TemporaryDirectory(dir=_SCRATCH) as scratch:
        return _make_base(Path(scratch) / "logs")


def _make_base(root: Path) -> BaseLog:
    manager = _manager(root)
    manager.startup()
    manager.check_and_write_meta_properties(BROKER_ID, CLUSTER_ID)
    lg = manager.get_or_create_log(TOPIC, PARTITION, _CONFIG, TOPIC_ID)
    manager.flush_created_logs(manager.take_created_logs())
    for i in range(6):
        lg.append_as_leader(build_batch([SimpleRecord(b"v" * 20, b"k%d" % i)], timestamp=NOW_MS), i // 2)
    lg.append_as_leader(build_batch([SimpleRecord(b"x" * 50, b"a")] * 3, timestamp=NOW_MS,
                                    compression=CompressionType.GZIP, producer_id=7, producer_epoch=0,
                                    base_sequence=0), 3)
    for pid, marker in ((8, ControlRecordType.ABORT), (9, ControlRecordType.COMMIT)):
        lg.append_as_leader(build_batch([SimpleRecord(b"y", b"t")], timestamp=NOW_MS, producer_id=pid,
                                        producer_epoch=0, base_sequence=0, is_transactional=True),
                            3, origin=AppendOrigin.COORDINATOR)
        lg.append_as_leader(build_end_txn_marker_batch(marker, producer_id=pid, producer_epoch=0,
                                                       coordinator_epoch=1, timestamp=NOW_MS),
                            3, origin=AppendOrigin.COORDINATOR)
    lg.append_as_leader(build_batch([SimpleRecord(b"z", b"last")], timestamp=NOW_MS), 4)
    lg.update_high_watermark(lg.log_end_offset)
    end_offset = lg.log_end_offset
    manager.shutdown()
    contents = {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}
    files = tuple(sorted(name for name in contents if name not in (".lock", CLEAN_SHUTDOWN_FILE)))
    batches = {name: tuple((pos + h.size, h.next_offset) for pos, h in iter_batches(contents[name]))
               for name in files if name.endswith(LOG_SUFFIX)}
    return BaseLog(files, contents, end_offset, batches)
