/*
 * The device's IP interface. A RoCE or IPoIB port has a network interface that carries the address rdma_cm
 * binds to, and middleware finds RDMA devices by binding each interface's address through rdma_cm
 * (libfabric's verbs provider does; it skips loopback interfaces). A node answers to its own address
 * (pagewire.node.address): in a container or pod that is eth0's, but nodes that share one host answer to
 * 127.0.1.x, which no interface lists. getifaddrs here lists the first device's node address as the
 * interface pagewire0 when no interface of the host has it, as an IPoIB port's ib0 would be listed.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pw.h"
#include "wire.h"

/* One listed interface, allocated apart from libc's block, which freeifaddrs below takes back off the list. */
struct device_interface {
	struct ifaddrs entry;
	struct sockaddr_storage address;
	struct sockaddr_storage netmask;
	char name[IFNAMSIZ];
	struct device_interface *next_given;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct device_interface *given; /* every entry handed out and not freed yet */
static uint8_t node_address[16];
static size_t node_address_len;   /* 0 until the node has said it */

typedef int (*getifaddrs_fn)(struct ifaddrs **);
typedef void (*freeifaddrs_fn)(struct ifaddrs *);

/* The first device's node address, asked once it answers (no node running: nothing to list). */
static size_t first_node_address(uint8_t out[16])
{
	pthread_mutex_lock(&lock);
	if (!node_address_len) {
		int n = 0;
		struct ibv_device **list = ibv_get_device_list(&n);
		if (list && n > 0) {
			struct pw_conn conn = { .fd = -1 };
			pthread_mutex_init(&conn.lock, NULL);
			if (pw_conn_open_quiet(&conn, list[0]->dev_path) == 0) {
				Pagewire__Verbs__V1__DescribeNodeRequest req = PAGEWIRE__VERBS__V1__DESCRIBE_NODE_REQUEST__INIT;
				Pagewire__Verbs__V1__DescribeNodeResponse *node = NULL;
				if (pw_call(&conn, "DescribeNode", &req.base, &pagewire__verbs__v1__describe_node_response__descriptor,
					    (ProtobufCMessage **)&node) == 0) {
					if (node->address.len == 4 || node->address.len == 16) {
						memcpy(node_address, node->address.data, node->address.len);
						node_address_len = node->address.len;
					}
					protobuf_c_message_free_unpacked(&node->base, NULL);
				}
				pw_conn_close(&conn);
			}
		}
		if (list)
			ibv_free_device_list(list);
	}
	size_t len = node_address_len;
	memcpy(out, node_address, len);
	pthread_mutex_unlock(&lock);
	return len;
}

static int same_address(const struct sockaddr *sa, const uint8_t *ip, size_t len)
{
	if (sa->sa_family == AF_INET && len == 4)
		return !memcmp(&((const struct sockaddr_in *)sa)->sin_addr, ip, 4);
	if (sa->sa_family == AF_INET6 && len == 16)
		return !memcmp(&((const struct sockaddr_in6 *)sa)->sin6_addr, ip, 16);
	return 0;
}

__attribute__((visibility("default"))) int getifaddrs(struct ifaddrs **ifap)
{
	static getifaddrs_fn real;
	if (!real)
		real = (getifaddrs_fn)dlsym(RTLD_NEXT, "getifaddrs");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	int result = real(ifap);
	uint8_t ip[16];
	size_t len;
	if (result != 0 || !(len = first_node_address(ip)))
		return result;
	struct ifaddrs *last = NULL;
	for (struct ifaddrs *ifa = *ifap; ifa; ifa = ifa->ifa_next) {
		if (ifa->ifa_addr && !(ifa->ifa_flags & IFF_LOOPBACK) && same_address(ifa->ifa_addr, ip, len))
			return result; /* an interface of the host has it (a container's eth0) */
		last = ifa;
	}
	struct device_interface *d = calloc(1, sizeof(*d));
	if (!d)
		return result;
	snprintf(d->name, sizeof(d->name), "pagewire0");
	if (len == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)&d->address;
		in->sin_family = AF_INET;
		memcpy(&in->sin_addr, ip, 4);
		struct sockaddr_in *mask = (struct sockaddr_in *)&d->netmask;
		mask->sin_family = AF_INET;
		mask->sin_addr.s_addr = 0xffffffffu; /* the node's own address only */
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&d->address;
		in6->sin6_family = AF_INET6;
		memcpy(&in6->sin6_addr, ip, 16);
		struct sockaddr_in6 *mask = (struct sockaddr_in6 *)&d->netmask;
		mask->sin6_family = AF_INET6;
		memset(&mask->sin6_addr, 0xff, 16);
	}
	d->entry.ifa_name = d->name;
	d->entry.ifa_flags = IFF_UP | IFF_RUNNING | IFF_NOARP;
	d->entry.ifa_addr = (struct sockaddr *)&d->address;
	d->entry.ifa_netmask = (struct sockaddr *)&d->netmask;
	pthread_mutex_lock(&lock);
	d->next_given = given;
	given = d;
	pthread_mutex_unlock(&lock);
	if (last)
		last->ifa_next = &d->entry;
	else
		*ifap = &d->entry;
	return result;
}

/* Takes the listed device's entry back off the list (it is not in libc's block), then lets libc free its own. */
__attribute__((visibility("default"))) void freeifaddrs(struct ifaddrs *ifa)
{
	static freeifaddrs_fn real;
	if (!real)
		real = (freeifaddrs_fn)dlsym(RTLD_NEXT, "freeifaddrs");
	struct ifaddrs *first = ifa;
	pthread_mutex_lock(&lock);
	for (struct ifaddrs *prev = NULL, *at = ifa; at; prev = at, at = at->ifa_next) {
		struct device_interface **link = &given;
		while (*link && &(*link)->entry != at)
			link = &(*link)->next_given;
		if (!*link)
			continue;
		struct device_interface *d = *link;
		*link = d->next_given;
		if (prev)
			prev->ifa_next = NULL;
		else
			first = NULL;
		free(d);
		break; /* the device's entry is always the last */
	}
	pthread_mutex_unlock(&lock);
	if (first && real)
		real(first);
}
