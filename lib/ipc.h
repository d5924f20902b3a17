/* Internal to the p2p layer: the CUDA IPC calls of the device mailboxes (ipc.cu, used by
 * mailbox.c). Built without CUDA they are stubs that fail, so no pair uses IPC. */
#ifndef DT_IPC_H
#define DT_IPC_H

#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DTI_IPC_HANDLE 64
#ifdef DT_HAVE_CUDA
/* 0 on success; else -1, and why holds CUDA's words */
int dti_ipc_export(void *dev, unsigned char handle[DTI_IPC_HANDLE], char *why, size_t n);
int dti_ipc_open(const unsigned char handle[DTI_IPC_HANDLE], void **dev, char *why, size_t n);
void dti_ipc_close(void *dev);
void dti_ipc_bus_id(char *buf, int n);     /* this rank's GPU: "0000:3b:00.0" */
int dti_ipc_host_register(void *p, size_t nbytes);    /* pinned, for fast copies: 0 ok */
void dti_ipc_host_unregister(void *p);
#else
static inline int dti_ipc_export(void *d, unsigned char h[DTI_IPC_HANDLE], char *w, size_t n)
{ (void)d; (void)h; if (n) snprintf(w, n, "built without CUDA"); return -1; }
static inline int dti_ipc_open(const unsigned char h[DTI_IPC_HANDLE], void **d, char *w, size_t n)
{ (void)h; (void)d; if (n) snprintf(w, n, "built without CUDA"); return -1; }
static inline void dti_ipc_close(void *d) { (void)d; }
static inline void dti_ipc_bus_id(char *b, int n) { if (n) b[0] = 0; }
static inline int dti_ipc_host_register(void *p, size_t n) { (void)p; (void)n; return -1; }
static inline void dti_ipc_host_unregister(void *p) { (void)p; }
#endif

#ifdef __cplusplus
}
#endif

#endif /* DT_IPC_H */
