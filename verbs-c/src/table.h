/*
 * A growable table of object pointers in no particular order: the context's queue pairs, shared receive
 * queues and registrations, and the connection manager's ids (librdmacm's indexer.h plays this part
 * there). Lookups scan it; removal moves the last entry into the hole. The caller holds whatever lock
 * guards the objects the table lists.
 */
#ifndef PW_TABLE_H
#define PW_TABLE_H

struct pw_table {
	void **items;
	int count;
	int slots;
};

/* Adds `item`, growing the table (to `first_slots` the first time, doubling after): 0, or ENOMEM. */
int pw_table_add(struct pw_table *t, void *item, int first_slots);

/* Removes `item` if the table lists it: 1 when it did, 0 when not. */
int pw_table_remove(struct pw_table *t, const void *item);

/* Puts `to` where `from` was listed: 1 when it was, 0 when not. */
int pw_table_replace(struct pw_table *t, const void *from, void *to);

/* Empties the table and frees its storage (not what it listed). */
void pw_table_free(struct pw_table *t);

#endif
