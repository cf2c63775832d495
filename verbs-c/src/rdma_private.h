/*
 * The prototypes of the functions libibverbs 44 exports whose declarations live in rdma-core headers that
 * Debian does not install (libibverbs/driver.h and marshall.h, and compat-1_0.c for ibv_register_driver).
 * The library's definitions are compiled against these, and test/abi_check.sh checks every export against
 * them and the installed public headers: a caller (the real librdmacm, a provider) uses exactly these types.
 */
#ifndef PW_RDMA_PRIVATE_H
#define PW_RDMA_PRIVATE_H

#include <stddef.h>
#include <stdint.h>

#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>

/* driver.h */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

const char *ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size);
int ibv_dontfork_range(void *base, size_t size);
int ibv_dofork_range(void *base, size_t size);
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num, unsigned int index, enum ibv_gid_type_sysfs *type);

/* marshall.h */
void ibv_copy_qp_attr_from_kern(struct ibv_qp_attr *dst, struct ib_uverbs_qp_attr *src);
void ibv_copy_ah_attr_from_kern(struct ibv_ah_attr *dst, struct ib_uverbs_ah_attr *src);
void ibv_copy_path_rec_from_kern(struct ibv_sa_path_rec *dst, struct ib_user_path_rec *src);
void ibv_copy_path_rec_to_kern(struct ib_user_path_rec *dst, struct ibv_sa_path_rec *src);

/* compat-1_0.c: the provider entry point of libibverbs 1.1's loader */
typedef struct ibv_device *(*ibv_driver_init_func_1_1)(const char *uverbs_sys_path, int abi_version);
void ibv_register_driver(const char *name, ibv_driver_init_func_1_1 init_func);

#endif
