/**
 * The Cluster hash slot of a key, as Redis computes it (CRC16/XMODEM of the key, or of its hash
 * tag, modulo 16384): the store needs it to know which master a call goes to before it sends
 * it, so that a stopped master opens its own circuit breaker and not every other master's.
 */
const TABLE = crcTable();

function crcTable(): Uint16Array {
  const table = new Uint16Array(256);
  for (let byte = 0; byte < 256; byte++) {
    let crc = byte << 8;
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 0x8000 ? ((crc << 1) ^ 0x1021) & 0xffff : (crc << 1) & 0xffff;
    }
    table[byte] = crc;
  }
  return table;
}

/** The slot of `key`: its hash tag's (the part between the first `{` and the next `}`, when not empty), else the whole key's. */
export function keySlot(key: string): number {
  let bytes = Buffer.from(key, "utf8");
  const open = bytes.indexOf(0x7b);
  if (open !== -1) {
    const close = bytes.indexOf(0x7d, open + 1);
    if (close > open + 1) bytes = bytes.subarray(open + 1, close);
  }
  let crc = 0;
  for (const byte of bytes)
    crc = ((crc << 8) & 0xffff) ^ (TABLE[((crc >> 8) ^ byte) & 0xff] as number);
  return crc % 16384;
}
