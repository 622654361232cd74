// Redis Cluster key slots: which slot a key hashes to, and which keys a client may send together.
// A script, transaction or pipeline must stay on one node (scripts and transactions: one slot), so
// cluster-mode reads group their keys by the node that serves each key's slot and send one
// pipeline per node.

const TABLE = (() => {
  const t = new Uint16Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i << 8;
    for (let b = 0; b < 8; b++) c = c & 0x8000 ? ((c << 1) ^ 0x1021) & 0xffff : (c << 1) & 0xffff;
    t[i] = c;
  }
  return t;
})();

function crc16(bytes: Uint8Array, start: number, end: number): number {
  let crc = 0;
  for (let i = start; i < end; i++) crc = ((crc << 8) & 0xffff) ^ TABLE[((crc >> 8) ^ bytes[i]) & 0xff];
  return crc;
}

/**
 * The cluster slot of `key` (CRC16/XMODEM mod 16384). A hash tag (the text between the first `{`
 * and the next `}`, when not empty) is hashed instead of the whole key, so `task:{id}` and
 * `rl:task:{id}:owner` share a slot.
 */
export function keySlot(key: string): number {
  const bytes = Buffer.from(key, 'utf8');
  let start = 0;
  let end = bytes.length;
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) {
      start = open + 1;
      end = close;
    }
  }
  return crc16(bytes, start, end) & 16383;
}

/**
 * Indexes of `keys` grouped by the nodes that serve their slots, as a cluster client's slot table
 * says (`slots[slot]` = node keys, the primary first). Keys of one group may share a pipeline.
 * Returns null when the table does not cover every key's slot yet (not connected, or a slot whose
 * primary is unknown): the caller then sends one command per key and lets the client route them.
 */
export function groupByNode(slots: readonly (readonly string[] | undefined)[], keys: readonly string[]) {
  const groups = new Map<string, number[]>();
  for (let i = 0; i < keys.length; i++) {
    const nodes = slots[keySlot(keys[i])];
    if (!nodes || nodes.length === 0) return null;
    const id = nodes.join(';');
    const g = groups.get(id);
    if (g) g.push(i);
    else groups.set(id, [i]);
  }
  return groups;
}
