#include <errno.h>
#include <stdlib.h>

#include "table.h"

int pw_table_add(struct pw_table *t, void *item, int first_slots)
{
	if (t->count == t->slots) {
		int slots = t->slots ? 2 * t->slots : first_slots;
		void **grown = realloc(t->items, (size_t)slots * sizeof(*grown));
		if (!grown)
			return ENOMEM;
		t->items = grown;
		t->slots = slots;
	}
	t->items[t->count++] = item;
	return 0;
}

int pw_table_remove(struct pw_table *t, const void *item)
{
	for (int i = 0; i < t->count; i++) {
		if (t->items[i] == item) {
			t->items[i] = t->items[--t->count];
			return 1;
		}
	}
	return 0;
}

int pw_table_replace(struct pw_table *t, const void *from, void *to)
{
	for (int i = 0; i < t->count; i++) {
		if (t->items[i] == from) {
			t->items[i] = to;
			return 1;
		}
	}
	return 0;
}

void pw_table_free(struct pw_table *t)
{
	free(t->items);
	t->items = NULL;
	t->count = 0;
	t->slots = 0;
}
