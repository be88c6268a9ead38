/* fth_chakra.h: a small protobuf wire-format encoder and the Chakra execution-
 * trace messages built on it (what ASTRA-sim replays).
 *
 * Wire format: Protocol Buffers encoding (protobuf.dev/programming-guides/
 * encoding): a field is a key varint (field_number << 3 | wire_type), then a
 * varint (wire type 0) or a varint length and that many bytes (wire type 2:
 * strings, sub-messages, packed repeated scalars). proto3 omits scalars equal
 * to 0, except inside a oneof, which is always written (its presence is its
 * meaning: comm_type ALL_REDUCE is 0).
 *
 * Chakra's schema: mlcommons/chakra schema/protobuf/et_def.proto (our copy,
 * field numbers unchanged, in tests/fixtures/chakra/et_def.proto). A trace
 * file is GlobalMetadata then Node messages, each prefixed by its length as a
 * varint (Chakra's protolib.py encodeMessage / decodeMessage framing).
 *
 * Encoding never allocates: messages are written into caller-provided
 * buffers; a buffer too small sets `overflow` and writes nothing more. */
#ifndef FTH_CHAKRA_H
#define FTH_CHAKRA_H

#include <stddef.h>
#include <stdint.h>

/// A write cursor over a caller-owned buffer.
typedef struct fth_pb {
  uint8_t *buf;
  size_t cap, len;
  int overflow; ///< 1 once a write did not fit (len stays at the last complete write)
} fth_pb;

/// Protobuf wire types used here.
enum { FTH_PB_VARINT = 0, FTH_PB_LEN = 2 };

void fth_pb_init(fth_pb *pb, uint8_t *buf, size_t cap);
/// Bytes of `v` as a base-128 varint (1..10).
size_t fth_pb_varint_size(uint64_t v);
/// Append `v` as a varint (little-endian groups of 7 bits, high bit = more).
void fth_pb_varint(fth_pb *pb, uint64_t v);
/// Append raw bytes.
void fth_pb_raw(fth_pb *pb, const void *data, size_t n);
/// Append the key of `field` with `wire` type.
void fth_pb_key(fth_pb *pb, unsigned field, unsigned wire);
/// A varint field (uint64, int64 as two's complement, bool, enum); nothing when v == 0.
void fth_pb_uint(fth_pb *pb, unsigned field, uint64_t v);
/// A length-delimited field holding `n` bytes of `data` (string, bytes, sub-message).
void fth_pb_bytes(fth_pb *pb, unsigned field, const void *data, size_t n);
/// A NUL-terminated string field; nothing when empty.
void fth_pb_string(fth_pb *pb, unsigned field, const char *s);
/// A packed repeated uint64 field; nothing when n == 0.
void fth_pb_packed(fth_pb *pb, unsigned field, const uint64_t *v, int n);

/* ---- Chakra ---------------------------------------------------------------------------------- */

/// et_def.proto NodeType.
typedef enum fth_chakra_node_type {
  FTH_CHAKRA_METADATA_NODE = 1,
  FTH_CHAKRA_COMP_NODE = 4,
  FTH_CHAKRA_COMM_SEND_NODE = 5,
  FTH_CHAKRA_COMM_RECV_NODE = 6,
  FTH_CHAKRA_COMM_COLL_NODE = 7
} fth_chakra_node_type;

/// et_def.proto CollectiveCommType.
typedef enum fth_chakra_coll {
  FTH_CHAKRA_ALL_REDUCE = 0,
  FTH_CHAKRA_ALL_GATHER = 2,
  FTH_CHAKRA_ALL_TO_ALL = 6,
  FTH_CHAKRA_REDUCE_SCATTER = 7
} fth_chakra_coll;

#define FTH_CHAKRA_MAX_DEPS 8
/// The schema version written in GlobalMetadata (ASTRA-sim's examples use 0.0.4).
#define FTH_CHAKRA_VERSION "0.0.4"

/// One node as fathom writes it. Attributes (et_def.proto AttributeProto,
/// named as ASTRA-sim's feeder reads them): every node is_cpu_op = false;
/// COMP_NODE num_ops (int64) and tensor_size (uint64); COMM_COLL_NODE
/// comm_type and comm_size (int64) and pg_name (string); COMM_SEND/RECV_NODE
/// comm_src, comm_dst, comm_tag (int32) and comm_size (int64).
typedef struct fth_chakra_node {
  uint64_t id;
  const char *name;
  fth_chakra_node_type type;
  uint64_t data_deps[FTH_CHAKRA_MAX_DEPS];
  int n_deps;
  uint64_t duration_micros;
  uint64_t num_ops, tensor_size; ///< COMP_NODE
  fth_chakra_coll comm_type;     ///< COMM_COLL_NODE
  uint64_t comm_size;            ///< COMM nodes, bytes
  const char *pg_name;           ///< COMM_COLL_NODE: the communicator group's id, as text
  int comm_src, comm_dst, comm_tag; ///< COMM_SEND/RECV_NODE
} fth_chakra_node;

/// Append an AttributeProto {name, int64_val = v} as field `field` of the enclosing message.
void fth_chakra_attr_int64(fth_pb *pb, unsigned field, const char *name, int64_t v);
/// Append an AttributeProto {name, uint64_val = v}.
void fth_chakra_attr_uint64(fth_pb *pb, unsigned field, const char *name, uint64_t v);
/// Append an AttributeProto {name, int32_val = v}.
void fth_chakra_attr_int32(fth_pb *pb, unsigned field, const char *name, int32_t v);
/// Append an AttributeProto {name, bool_val = v}.
void fth_chakra_attr_bool(fth_pb *pb, unsigned field, const char *name, int v);
/// Append an AttributeProto {name, string_val = v}.
void fth_chakra_attr_string(fth_pb *pb, unsigned field, const char *name, const char *v);

/// Append the framed GlobalMetadata {version, attr: string attributes
/// keys[i] = values[i]} (n pairs) to `out`.
void fth_chakra_metadata(fth_pb *out, const char *const *keys, const char *const *values, int n);

/// Append the framed Node `n` to `out` (varint length, then the message).
void fth_chakra_node_write(fth_pb *out, const fth_chakra_node *n);

#endif
