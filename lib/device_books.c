/* The device books (buf.h's dt_device_books): counters that any thread adds to,
 * atomically (DDP's communication thread works beside the main one). A leaf: the CUDA
 * files count their launches, waits and allocations here (dti_book, cuda.h), and buf.c
 * the copies between host and GPU, by what they carry; nothing here calls back. */
#include "buf.h"
#include "cuda.h"

static unsigned long long books[DTI_BOOK_N];

void dti_book(int what, size_t n)
{
    __atomic_fetch_add(&books[what], (unsigned long long)n, __ATOMIC_RELAXED);
}

void dt_device_books_get(dt_device_books *b)
{
    unsigned long long v[DTI_BOOK_N];
    for (int i = 0; i < DTI_BOOK_N; i++)
        v[i] = __atomic_load_n(&books[i], __ATOMIC_RELAXED);
    *b = (dt_device_books){
        .launches = v[DTI_BOOK_LAUNCH], .waits = v[DTI_BOOK_WAIT],
        .allocs = v[DTI_BOOK_ALLOC],
        .tensors = v[DTI_BOOK_TENSOR], .tensor_bytes = v[DTI_BOOK_TENSOR_BYTES],
        .inputs = v[DTI_BOOK_INPUT], .input_bytes = v[DTI_BOOK_INPUT_BYTES],
        .numbers = v[DTI_BOOK_NUMBER], .number_bytes = v[DTI_BOOK_NUMBER_BYTES],
    };
}
