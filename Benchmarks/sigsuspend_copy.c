// Benchmarks/warm_callgrind.py preloads this into fpctl under valgrind.
//
// libdispatch's dispatch_main() (Swift's async main on Linux) parks the main
// thread in sigsuspend() with a mask in read-only memory; valgrind 3.19's
// wrapper of rt_sigsuspend edits the mask in place and dies of a SIGSEGV
// ("the 'impossible' happened"). The same call with a copy of the mask on the
// stack behaves alike and lets valgrind run every networked fpctl command.
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

int sigsuspend(const sigset_t *mask) {
    sigset_t copy = *mask;
    return (int)syscall(SYS_rt_sigsuspend, &copy, sizeof(unsigned long));
}
