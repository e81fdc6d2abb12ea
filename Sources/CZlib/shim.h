#include <zlib.h>

/* deflateInit2 is a macro Swift cannot import: raw deflate (no zlib header,
 * window 15 bits), memory level 8, default strategy, at `level`; the
 * parameters docs/bundle-format.md fixes for a bundle's deflated entries. */
static inline int fpctl_deflate_init_raw(z_streamp stream, int level) {
    return deflateInit2(stream, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY);
}
