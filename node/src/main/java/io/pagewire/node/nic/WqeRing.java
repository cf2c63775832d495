package io.pagewire.node.nic;

import java.util.Arrays;

/** The outstanding requests of a queue pair in PSN order: a growable ring with binary search by PSN. */
final class WqeRing {
    private SendWqe[] items = new SendWqe[16];
    private int head;
    private int size;

    int size() {
        return size;
    }

    boolean isEmpty() {
        return size == 0;
    }

    SendWqe get(int index) {
        return items[(head + index) & (items.length - 1)];
    }

    SendWqe first() {
        return size == 0 ? null : items[head];
    }

    SendWqe last() {
        return size == 0 ? null : get(size - 1);
    }

    void add(SendWqe wqe) {
        if (size == items.length) {
            SendWqe[] grown = new SendWqe[items.length * 2];
            for (int i = 0; i < size; i++) {
                grown[i] = get(i);
            }
            items = grown;
            head = 0;
        }
        items[(head + size) & (items.length - 1)] = wqe;
        size++;
    }

    SendWqe removeFirst() {
        SendWqe wqe = items[head];
        items[head] = null;
        head = (head + 1) & (items.length - 1);
        size--;
        return wqe;
    }

    void clear() {
        Arrays.fill(items, null);
        head = 0;
        size = 0;
    }

    /** The index of the request occupying {@code psn}, or -1. */
    int indexOf(long psn) {
        int lo = 0;
        int hi = size - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            SendWqe wqe = get(mid);
            if (psn < wqe.psnFirst) {
                hi = mid - 1;
            } else if (psn > wqe.psnLast()) {
                lo = mid + 1;
            } else {
                return mid;
            }
        }
        return -1;
    }
}
