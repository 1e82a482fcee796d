/* A fixed-size ring buffer, written to exercise the grammar queries. */
#include <stdlib.h>

struct ring {
    int *data;
    size_t head;
    size_t len;
    size_t cap;
};

static int ring_full(const struct ring *r);

struct ring *ring_new(size_t cap) {
    struct ring *r = malloc(sizeof *r);
    if (r == NULL) {
        return NULL;
    }
    r->data = calloc(cap, sizeof(int));
    r->head = r->len = 0;
    r->cap = cap;
    return r;
}

static int ring_full(const struct ring *r) {
    return r->len == r->cap;
}

int ring_push(struct ring *r, int value) {
    if (ring_full(r)) {
        return -1;
    }
    r->data[(r->head + r->len) % r->cap] = value;
    r->len++;
    return 0;
}

void ring_clear(struct ring *r) {}

void ring_free(struct ring *r) {
    free(r->data);
    free(r);
}
