/* Tests/Desktop/preload.c: the library the session's user preloads into her agent in
 * run.sh's scenario (j). It does nothing but say it was loaded (a line in /tmp/xdl-preload.log):
 * the guard must refuse the agent for running code from a file root does not own, whatever
 * that code does. run.sh builds it on the host (cc -shared) and copies it to alice's home. */
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

__attribute__((constructor)) static void xdl_preloaded(void) {
    char line[64];
    int fd = open("/tmp/xdl-preload.log", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    int n = snprintf(line, sizeof line, "%ld\n", (long)getpid());
    if (n > 0) (void)!write(fd, line, (size_t)n);
    close(fd);
}
