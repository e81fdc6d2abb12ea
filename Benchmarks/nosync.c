/* A benchmark's reference, never a way to run fpctl: LD_PRELOAD=nosync.so
 * turns fsync, fdatasync, syncfs and sync into calls that do nothing and
 * succeed, so the same fpctl binary does the same work minus every sync
 * (what eatmydata does; written here so that its coverage of syncfs is not a
 * question of the installed version). warm under it is warm's rate when
 * durability costs nothing: the ceiling group commit is measured against.
 *
 * cc -O2 -shared -fPIC -o nosync.so Benchmarks/nosync.c
 */
int fsync(int fd) { (void)fd; return 0; }
int fdatasync(int fd) { (void)fd; return 0; }
int syncfs(int fd) { (void)fd; return 0; }
void sync(void) {}
