/* What dtlab says about bad input, before and during start-up (prog.h): the two lines of
 * a usage error, an environment variable's mistake, and whether an output path can
 * really be written. dt_init (init.c) and the programs' helpers (prog.c) both use it;
 * it calls neither. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>
#include "prog.h"
#include "trace.h"

const char *dti_prog_name(void)
{
    extern char *program_invocation_short_name;   /* glibc */
    return program_invocation_short_name;
}

/* The sentence stays the last thing on the screen: a usage text after it (train's has
 * 38 lines) would scroll it away. The wording matches dtviz's. */
void dti_usage_say(const char *why)
{
    const char *name = dti_prog_name();
    fprintf(stderr, "%s: %s\nTry '%s --help' for usage.\n", name, why, name);
    fflush(stderr);
}

void dti_env_say(const char *why)
{
    fprintf(stderr, "dtlab: %s\ndtlab: the variables dtlab reads, and their values: "
            "docs/environment.md\n", why);
    fflush(stderr);
}

/* Whether path can really be written: permissions do not tell for root, nor in /proc,
 * /sys or on a read-only mount. A regular file that exists is opened for writing, not
 * truncated, and must not lie in a kernel file system (proc, sysfs: root may open
 * /proc/version for writing; the write fails); a missing one is made with O_EXCL and
 * removed at once; a device or a pipe is left alone (a pipe's open would wait for a
 * reader). A folder (is_dir): a trial file made in it and removed, or, missing, the
 * folder itself made and removed. Returns 0, or errno (EACCES for a kernel file). */
static int trial_write(const char *path, int is_dir)
{
    struct stat st;
    char f[PATH_MAX + 32];
    int there = stat(path, &st) == 0, fd;
    if (there && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return 0;
    if (is_dir && !there)
        return mkdir(path, 0755) != 0 ? errno : rmdir(path) != 0 ? errno : 0;
    if (is_dir && snprintf(f, sizeof f, "%s/.dtlab-trial-%d", path, (int)getpid()) >=
                  (int)sizeof f)
        return ENAMETOOLONG;
    const char *p = is_dir ? f : path;
    fd = open(p, there && !is_dir ? O_WRONLY : O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return errno == EEXIST ? 0 : errno;     /* made meanwhile: someone can write it */
    struct statfs fs;
    int kernel = fstatfs(fd, &fs) == 0 && (fs.f_type == PROC_SUPER_MAGIC ||
                                           fs.f_type == SYSFS_MAGIC);
    close(fd);
    if (kernel)
        return EACCES;
    if ((is_dir || !there) && unlink(p) != 0)
        return errno;
    return 0;
}

int dti_output_why(const char *opt, const char *path, int is_dir, char *why, size_t len)
{
    char err[512];
    int rc = dt_output_check(path, is_dir, err, sizeof err), e;
    if (rc == -2)                       /* no file can have that name: show the name */
        snprintf(why, len, "%s '%s': %s", opt, path, err);
    else if (rc)                        /* err names the path and the reason */
        snprintf(why, len, "%s: %s", opt, err);
    else if ((e = trial_write(path, is_dir)) != 0)
        snprintf(why, len, "%s: cannot write %s: %s", opt, path, strerror(e)), rc = -1;
    return rc;
}
