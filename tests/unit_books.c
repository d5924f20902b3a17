/* Unit tests of the device books (lib/buf.h, dt_device_books): what a process asked of
 * its GPU, the counters train prints for its steps and scripts/gpu-check.sh reads to
 * fail a run that computed on the host while naming the GPU. No MPI.
 *
 * On the host: copies, zeroing and the layers' CPU loops count nothing (a run on the
 * CPU has empty books). With a GPU: a device allocation and a free count one each; a
 * copy across counts once, with its bytes, under what it carried (dt_memcpy: tensor
 * data, dt_memcpy_input: the batch, dt_memcpy_number: a number the host needs), in both
 * directions; a copy between two device buffers counts nothing; a linear layer on the
 * device counts its products and kernel as launches and no host wait (its work is
 * queued: DT_SYNC=1 waits), and settling that work one wait, a second none; the
 * cross-entropy reads one number back (its total and flag together). Without a GPU the
 * host half runs alone, and main says once "GPU comparisons skipped: no GPU".
 *
 *   build/tests/unit_books
 */
#include <check.h>
#include "unit.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "buf.h"
#include "cuda.h"
#include "nn/nn.h"

#define REQUIRE(cond, ...) do { if (!(cond)) ck_abort_msg(__VA_ARGS__); } while (0)

static int gpu;          /* set by main: 1 when a GPU can be used */

static dt_device_books now(void)
{
    dt_device_books b;
    dt_device_books_get(&b);
    return b;
}

/* b - a, field by field, as "launches 2 waits 1 ..." for messages */
static const char *diff_text(const dt_device_books *a, const dt_device_books *b)
{
    static char s[256];
    snprintf(s, sizeof s, "launches %llu waits %llu allocs %llu tensors %llu (%llu B) "
             "inputs %llu (%llu B) numbers %llu (%llu B)", b->launches - a->launches,
             b->waits - a->waits, b->allocs - a->allocs, b->tensors - a->tensors,
             b->tensor_bytes - a->tensor_bytes, b->inputs - a->inputs,
             b->input_bytes - a->input_bytes, b->numbers - a->numbers,
             b->number_bytes - a->number_bytes);
    return s;
}

static int same(const dt_device_books *a, const dt_device_books *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* ==== the host: nothing counted ==== */

START_TEST(test_host_counts_nothing)
{
    float a[100], b[100], y[4 * 3], W[3 * 5], x[4 * 5], bias[3];
    int labels[4] = { 0, 2, 1, 2 };
    for (int i = 0; i < 100; i++)
        a[i] = (float)i;
    for (int i = 0; i < 15; i++)
        W[i] = 0.1f * (float)(i % 7) - 0.3f;
    for (int i = 0; i < 20; i++)
        x[i] = 0.05f * (float)i;
    memset(bias, 0, sizeof bias);
    dt_device_books before = now();
    dt_memcpy(b, a, sizeof a);
    dt_memcpy_input(a, b, sizeof a);
    dt_memcpy_number(b, a, sizeof a);
    dt_memzero(b, sizeof b);
    dt_linear_forward(x, W, bias, y, 4, 5, 3);
    (void)dt_xent(y, labels, 4, 3, 0.25f, y);
    dt_device_books after = now();
    REQUIRE(same(&before, &after), "host work counted in the device books: %s",
            diff_text(&before, &after));
}
END_TEST

/* ==== the GPU ==== */

START_TEST(test_device_copies)
{
    if (!gpu)
        return;
    unit_use_gpu(gpu);
    enum { N = 1000 };
    float *h = calloc(N, sizeof(float)), *h2 = calloc(N, sizeof(float));
    for (int i = 0; i < N; i++)
        h[i] = (float)i - 500.0f;

    dt_device_books a = now();
    float *d = dt_malloc(N * sizeof(float), DT_CUDA);
    float *d2 = dt_malloc(N * sizeof(float), DT_CUDA);
    dt_device_books b = now();
    REQUIRE(b.allocs - a.allocs == 2, "two device allocations: %s", diff_text(&a, &b));

    a = now();
    dt_memcpy(d, h, N * sizeof(float));                      /* up: tensor data */
    dt_memcpy(d2, d, N * sizeof(float));                     /* on the GPU: nothing */
    dt_memcpy(h2, d2, 10 * sizeof(float));                   /* down: tensor data */
    b = now();
    REQUIRE(b.tensors - a.tensors == 2 &&
            b.tensor_bytes - a.tensor_bytes == (N + 10) * sizeof(float) &&
            b.inputs == a.inputs && b.numbers == a.numbers,
            "two tensor copies across, one on the GPU: %s", diff_text(&a, &b));
    REQUIRE(memcmp(h, h2, 10 * sizeof(float)) == 0, "the copies lost the data");

    a = now();
    dt_memcpy_input(d, h, 7 * sizeof(float));
    dt_memcpy_number(h2, d, 3 * sizeof(float));
    dt_memcpy_number(d2, d, 3 * sizeof(float));              /* on the GPU: nothing */
    b = now();
    REQUIRE(b.inputs - a.inputs == 1 && b.input_bytes - a.input_bytes == 7 * sizeof(float) &&
            b.numbers - a.numbers == 1 && b.number_bytes - a.number_bytes == 3 * sizeof(float)
            && b.tensors == a.tensors,
            "one input up, one number down: %s", diff_text(&a, &b));

    a = now();
    dt_free(d);
    dt_free(d2);
    b = now();
    REQUIRE(b.allocs - a.allocs == 2, "two device frees: %s", diff_text(&a, &b));
    free(h);
    free(h2);
}
END_TEST

START_TEST(test_device_layers)
{
    if (!gpu)
        return;
    unit_use_gpu(gpu);
    enum { B = 8, IN = 16, OUT = 4 };
    float hx[B * IN], hW[OUT * IN], hb[OUT];
    int hl[B];
    for (int i = 0; i < B * IN; i++)
        hx[i] = 0.01f * (float)(i % 13) - 0.05f;
    for (int i = 0; i < OUT * IN; i++)
        hW[i] = 0.02f * (float)(i % 11) - 0.1f;
    for (int i = 0; i < OUT; i++)
        hb[i] = 0.1f * (float)i;
    for (int i = 0; i < B; i++)
        hl[i] = i % OUT;
    float *x = dt_malloc(sizeof hx, DT_CUDA), *W = dt_malloc(sizeof hW, DT_CUDA);
    float *bias = dt_malloc(sizeof hb, DT_CUDA), *y = dt_malloc(B * OUT * 4, DT_CUDA);
    int *lab = dt_malloc(sizeof hl, DT_CUDA);
    dt_memcpy(x, hx, sizeof hx);
    dt_memcpy(W, hW, sizeof hW);
    dt_memcpy(bias, hb, sizeof hb);
    dt_memcpy_input(lab, hl, sizeof hl);
    (void)dt_xent(y, lab, B, OUT, 1.0f, NULL);               /* scratch allocated once */

    dti_cuda_settle();
    dt_device_books a = now();
    dt_linear_forward(x, W, bias, y, B, IN, OUT);
    dt_device_books b = now();
    REQUIRE(b.launches - a.launches == 2 && b.tensors == a.tensors &&
            b.allocs == a.allocs && b.numbers == a.numbers,
            "linear forward: one product and the bias kernel, nothing across: %s",
            diff_text(&a, &b));
    /* queued, not waited for (lib/device.cu's "Queued work"), unless DT_SYNC=1 */
    int each = getenv("DT_SYNC") && strcmp(getenv("DT_SYNC"), "1") == 0;
    REQUIRE(b.waits - a.waits == (unsigned long long)each,
            "linear forward: %d host waits expected (DT_SYNC=%d): %s", each, each,
            diff_text(&a, &b));
    a = now();
    dti_cuda_settle();
    dti_cuda_settle();
    b = now();
    REQUIRE(b.waits - a.waits == (unsigned long long)!each && b.launches == a.launches,
            "settling queued work: one wait, and none for a stream with nothing queued: "
            "%s", diff_text(&a, &b));

    a = now();
    float loss = dt_xent(y, lab, B, OUT, 1.0f / B, y);
    b = now();
    REQUIRE(b.numbers - a.numbers == 1 && b.tensors == a.tensors && b.allocs == a.allocs
            && b.launches - a.launches >= 2,
            "cross-entropy: its kernels, one number read back, no allocation: %s (loss %g)",
            diff_text(&a, &b), (double)loss);
    dt_free(x); dt_free(W); dt_free(bias); dt_free(y); dt_free(lab);
}
END_TEST

/* ==== main ==== */

int main(void)
{
    gpu = unit_probe_gpu_or_say("unit_books", "the host's books are checked alone");
    Suite *s = suite_create("books");
    TCase *tc = tcase_create("books");
    tcase_add_test(tc, test_host_counts_nothing);
    tcase_add_test(tc, test_device_copies);
    tcase_add_test(tc, test_device_layers);
    tcase_set_timeout(tc, 60);
    suite_add_tcase(s, tc);
    return unit_run(s);
}
