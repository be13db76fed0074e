/* The cleaner's record scanner (record_scanner.scan_records) compiled: the same walk over a v2
 * batch's records, reading each record's length, offset delta, key and the sign of its value's
 * length, and with positions its start, end and timestamp delta.
 *
 * It is stricter than the Python scanner, never looser: every read stays inside
 * [pos, end), every varint has at most 10 bytes and no bits past the 64th, and any length that
 * is negative fails.  On any failure it returns -1 and the caller scans the batch again in
 * Python, which names the fault (or, where the Python scanner accepts what this one refuses,
 * returns what it finds).  When it returns 0, it read exactly the bytes the Python scanner
 * reads and found the same records.
 *
 * out holds 3 + 8 * count int64s: the numbers of keyed records, tombstones and keyless
 * records, then count-long columns: key starts, key ends, offsets (keyed records), tombstone
 * offsets, keyless offsets, record starts, record ends, timestamp deltas (keyed records; with
 * positions only).
 *
 * Built by scripts/bootstrap (python -m odradek.log.cleaner.native build) with the machine's
 * C compiler into a cache outside the repository, and loaded with ctypes.
 */

#include <stdint.h>

/* The zig-zag varlong at buf[*p], ending before end. */
static int varlong(const uint8_t *buf, int64_t *p, int64_t end, int64_t *value)
{
    uint64_t raw = 0;
    int64_t i = *p;
    for (int shift = 0; shift < 70; shift += 7) {
        if (i >= end)
            return -1;
        uint8_t b = buf[i++];
        if (shift == 63 && b > 1)
            return -1; /* past 64 bits */
        raw |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *p = i;
            *value = (int64_t)(raw >> 1) ^ -(int64_t)(raw & 1);
            return 0;
        }
    }
    return -1;
}

int odradek_scan_records(const uint8_t *buf, int64_t pos, int64_t end, int64_t count,
                         int64_t base_offset, int positions, int64_t *out)
{
    int64_t *key_starts = out + 3, *key_ends = key_starts + count, *offsets = key_ends + count;
    int64_t *tombstones = offsets + count, *keyless = tombstones + count;
    int64_t *starts = keyless + count, *ends = starts + count, *ts_deltas = ends + count;
    int64_t keyed = 0, dead = 0, unkeyed = 0;
    for (int64_t n = 0; n < count; n++) {
        int64_t p = pos, length, ts_delta, offset_delta, key_length;
        if (varlong(buf, &p, end, &length) || length < 0)
            return -1;
        int64_t rec_end = p + length;
        if (rec_end > end)
            return -1;
        p += 1; /* attributes */
        if (varlong(buf, &p, rec_end, &ts_delta) || varlong(buf, &p, rec_end, &offset_delta)
            || varlong(buf, &p, rec_end, &key_length))
            return -1;
        int64_t offset = base_offset + offset_delta;
        if (key_length < 0) {
            if (p >= rec_end)
                return -1;
            keyless[unkeyed++] = offset;
        } else {
            int64_t key_end = p + key_length;
            if (key_end >= rec_end)
                return -1;
            key_starts[keyed] = p;
            key_ends[keyed] = key_end;
            offsets[keyed] = offset;
            if (positions) {
                starts[keyed] = pos;
                ends[keyed] = rec_end;
                ts_deltas[keyed] = ts_delta;
            }
            keyed++;
            if (buf[key_end] & 1)
                tombstones[dead++] = offset;
        }
        pos = rec_end;
    }
    if (pos != end)
        return -1;
    out[0] = keyed;
    out[1] = dead;
    out[2] = unkeyed;
    return 0;
}
