package io.pagewire.node.nic;

import java.util.Arrays;
import java.util.Iterator;
import java.util.NoSuchElementException;

/**
 * Packets that travel together in one lane message: a list of reusable {@link Packet} slots. A sender
 * fills it slot by slot ({@link #add}) and clears it once the transport has written it; a receiver
 * decodes one lane message into it and clears it for the next. Slots are made the first time a batch
 * grows to them and reused from then on, so a batch in steady use allocates nothing.
 */
public final class PacketBatch implements Iterable<Packet> {
    private Packet[] slots = new Packet[0];
    private int size;

    /** A new empty batch. */
    public PacketBatch() {
    }

    /** A batch of copies of {@code packets} (tests, and packets built off the data path). */
    public static PacketBatch of(Packet... packets) {
        PacketBatch batch = new PacketBatch();
        for (Packet p : packets) {
            batch.addCopyOf(p);
        }
        return batch;
    }

    /** The next slot, cleared and counted in the batch: the caller fills it. */
    public Packet add() {
        if (size == slots.length) {
            int grown = Math.max(8, slots.length * 2);
            slots = Arrays.copyOf(slots, grown);
        }
        Packet slot = slots[size];
        if (slot == null) {
            slot = new Packet();
            slots[size] = slot;
        } else {
            slot.clear();
        }
        size++;
        return slot;
    }

    /** Adds {@code packet}'s fields as the next slot; the payload stays a view of the same array. */
    public void addView(Packet packet) {
        packet.copyHeadersTo(add());
    }

    /** Adds a copy of {@code packet} with a payload of its own. */
    public void addCopyOf(Packet packet) {
        packet.copy().copyHeadersTo(add());
    }

    /** Takes back the last slot {@link #add} handed out (its packet is not sent after all). */
    public void removeLast() {
        if (size == 0) {
            throw new IllegalStateException("the batch is empty");
        }
        size--;
    }

    public Packet get(int index) {
        if (index < 0 || index >= size) {
            throw new IndexOutOfBoundsException(index + " of " + size + " packets");
        }
        return slots[index];
    }

    public int size() {
        return size;
    }

    public boolean isEmpty() {
        return size == 0;
    }

    /** Empties the batch; its slots are kept for the next packets. */
    public void clear() {
        size = 0;
    }

    /** The payload bytes of every packet together. */
    public long payloadBytes() {
        long bytes = 0;
        for (int i = 0; i < size; i++) {
            bytes += slots[i].payloadLength();
        }
        return bytes;
    }

    /** A batch of its own: every packet and payload copied, to keep past the call that handed this one over. */
    public PacketBatch copy() {
        PacketBatch copy = new PacketBatch();
        for (int i = 0; i < size; i++) {
            copy.addCopyOf(slots[i]);
        }
        return copy;
    }

    @Override
    public Iterator<Packet> iterator() {
        return new Iterator<>() {
            private int next;

            @Override
            public boolean hasNext() {
                return next < size;
            }

            @Override
            public Packet next() {
                if (next >= size) {
                    throw new NoSuchElementException();
                }
                return slots[next++];
            }
        };
    }

    @Override
    public String toString() {
        return size + " packets";
    }
}
