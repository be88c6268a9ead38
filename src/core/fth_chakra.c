/* fth_chakra.c: protobuf wire encoding and Chakra messages (fth_chakra.h). */
#include "fth_chakra.h"

#include <string.h>

/* Field numbers of et_def.proto (mlcommons/chakra schema/protobuf/et_def.proto). */
enum {
  ATTR_NAME = 1,
  ATTR_INT32 = 7,
  ATTR_INT64 = 9,
  ATTR_UINT64 = 13,
  ATTR_BOOL = 27,
  ATTR_STRING = 29,
  META_VERSION = 1,
  META_ATTR = 2,
  NODE_ID = 1,
  NODE_NAME = 2,
  NODE_TYPE = 3,
  NODE_DATA_DEPS = 5,
  NODE_DURATION = 7,
  NODE_ATTR = 10
};

/* An attribute is small (a short name and one scalar or a short string). */
#define ATTR_BUF 256
/* A node: a few attributes, at most FTH_CHAKRA_MAX_DEPS dependencies, a name. */
#define NODE_BUF 1024

void fth_pb_init(fth_pb *pb, uint8_t *buf, size_t cap) {
  pb->buf = buf;
  pb->cap = cap;
  pb->len = 0;
  pb->overflow = 0;
}

size_t fth_pb_varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

void fth_pb_raw(fth_pb *pb, const void *data, size_t n) {
  if (pb->overflow || pb->cap - pb->len < n) {
    pb->overflow = 1;
    return;
  }
  if (n) memcpy(pb->buf + pb->len, data, n);
  pb->len += n;
}

void fth_pb_varint(fth_pb *pb, uint64_t v) {
  if (!pb->overflow && pb->cap - pb->len >= 10) { /* room for any varint: write in place */
    uint8_t *p = pb->buf + pb->len;
    while (v >= 0x80) {
      *p++ = (uint8_t)(v | 0x80);
      v >>= 7;
    }
    *p++ = (uint8_t)v;
    pb->len = (size_t)(p - pb->buf);
    return;
  }
  uint8_t tmp[10];
  size_t n = 0;
  while (v >= 0x80) {
    tmp[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  tmp[n++] = (uint8_t)v;
  fth_pb_raw(pb, tmp, n);
}

void fth_pb_key(fth_pb *pb, unsigned field, unsigned wire) {
  fth_pb_varint(pb, ((uint64_t)field << 3) | wire);
}

void fth_pb_uint(fth_pb *pb, unsigned field, uint64_t v) {
  if (v == 0) return;
  fth_pb_key(pb, field, FTH_PB_VARINT);
  fth_pb_varint(pb, v);
}

void fth_pb_bytes(fth_pb *pb, unsigned field, const void *data, size_t n) {
  fth_pb_key(pb, field, FTH_PB_LEN);
  fth_pb_varint(pb, n);
  fth_pb_raw(pb, data, n);
}

void fth_pb_string(fth_pb *pb, unsigned field, const char *s) {
  if (s && s[0]) fth_pb_bytes(pb, field, s, strlen(s));
}

void fth_pb_packed(fth_pb *pb, unsigned field, const uint64_t *v, int n) {
  if (n <= 0) return;
  size_t len = 0;
  for (int i = 0; i < n; i++) len += fth_pb_varint_size(v[i]);
  fth_pb_key(pb, field, FTH_PB_LEN);
  fth_pb_varint(pb, len);
  for (int i = 0; i < n; i++) fth_pb_varint(pb, v[i]);
}

/* An attribute: {name = 1, <oneof value> = field}, the value always written. */
static void attr_varint(fth_pb *pb, unsigned field, const char *name, unsigned value_field,
                        uint64_t v) {
  uint8_t b[ATTR_BUF];
  fth_pb a;
  fth_pb_init(&a, b, sizeof b);
  fth_pb_string(&a, ATTR_NAME, name);
  fth_pb_key(&a, value_field, FTH_PB_VARINT);
  fth_pb_varint(&a, v);
  if (a.overflow) {
    pb->overflow = 1;
    return;
  }
  fth_pb_bytes(pb, field, b, a.len);
}

void fth_chakra_attr_int64(fth_pb *pb, unsigned field, const char *name, int64_t v) {
  attr_varint(pb, field, name, ATTR_INT64, (uint64_t)v); /* negative: 10-byte two's complement */
}

void fth_chakra_attr_uint64(fth_pb *pb, unsigned field, const char *name, uint64_t v) {
  attr_varint(pb, field, name, ATTR_UINT64, v);
}

void fth_chakra_attr_int32(fth_pb *pb, unsigned field, const char *name, int32_t v) {
  /* int32 is sign-extended to 64 bits on the wire. */
  attr_varint(pb, field, name, ATTR_INT32, (uint64_t)(int64_t)v);
}

void fth_chakra_attr_bool(fth_pb *pb, unsigned field, const char *name, int v) {
  attr_varint(pb, field, name, ATTR_BOOL, v ? 1u : 0u);
}

void fth_chakra_attr_string(fth_pb *pb, unsigned field, const char *name, const char *v) {
  uint8_t b[ATTR_BUF];
  fth_pb a;
  fth_pb_init(&a, b, sizeof b);
  fth_pb_string(&a, ATTR_NAME, name);
  fth_pb_bytes(&a, ATTR_STRING, v, strlen(v));
  if (a.overflow) {
    pb->overflow = 1;
    return;
  }
  fth_pb_bytes(pb, field, b, a.len);
}

/* The framing: the message's length as a varint, then the message. */
static void frame(fth_pb *out, const fth_pb *msg) {
  if (msg->overflow) {
    out->overflow = 1;
    return;
  }
  if (out->overflow || out->cap - out->len < fth_pb_varint_size(msg->len) + msg->len) {
    out->overflow = 1;
    return;
  }
  fth_pb_varint(out, msg->len);
  fth_pb_raw(out, msg->buf, msg->len);
}

void fth_chakra_metadata(fth_pb *out, const char *const *keys, const char *const *values, int n) {
  uint8_t b[NODE_BUF];
  fth_pb m;
  fth_pb_init(&m, b, sizeof b);
  fth_pb_string(&m, META_VERSION, FTH_CHAKRA_VERSION);
  for (int i = 0; i < n; i++) fth_chakra_attr_string(&m, META_ATTR, keys[i], values[i]);
  frame(out, &m);
}

void fth_chakra_node_write(fth_pb *out, const fth_chakra_node *n) {
  uint8_t b[NODE_BUF];
  fth_pb m;
  fth_pb_init(&m, b, sizeof b);
  fth_pb_uint(&m, NODE_ID, n->id);
  fth_pb_string(&m, NODE_NAME, n->name);
  fth_pb_uint(&m, NODE_TYPE, (uint64_t)n->type);
  fth_pb_packed(&m, NODE_DATA_DEPS, n->data_deps, n->n_deps);
  fth_pb_uint(&m, NODE_DURATION, n->duration_micros);
  fth_chakra_attr_bool(&m, NODE_ATTR, "is_cpu_op", 0);
  switch (n->type) {
  case FTH_CHAKRA_COMP_NODE:
    fth_chakra_attr_int64(&m, NODE_ATTR, "num_ops", (int64_t)n->num_ops);
    fth_chakra_attr_uint64(&m, NODE_ATTR, "tensor_size", n->tensor_size);
    break;
  case FTH_CHAKRA_COMM_COLL_NODE:
    fth_chakra_attr_int64(&m, NODE_ATTR, "comm_type", (int64_t)n->comm_type);
    fth_chakra_attr_int64(&m, NODE_ATTR, "comm_size", (int64_t)n->comm_size);
    if (n->pg_name) fth_chakra_attr_string(&m, NODE_ATTR, "pg_name", n->pg_name);
    break;
  case FTH_CHAKRA_COMM_SEND_NODE:
  case FTH_CHAKRA_COMM_RECV_NODE:
    fth_chakra_attr_int32(&m, NODE_ATTR, "comm_src", n->comm_src);
    fth_chakra_attr_int32(&m, NODE_ATTR, "comm_dst", n->comm_dst);
    fth_chakra_attr_int32(&m, NODE_ATTR, "comm_tag", n->comm_tag);
    fth_chakra_attr_int64(&m, NODE_ATTR, "comm_size", (int64_t)n->comm_size);
    break;
  default:
    break;
  }
  frame(out, &m);
}
