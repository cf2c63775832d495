package io.pagewire.client.impl;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.ring.MemoryFile;
import io.pagewire.ring.PageTableFile;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Where the node shares its memory, an endpoint's stores, loads, atomics and waits inside the page
 * table's reach are the CPU's own: they need no connection at all (this test gives them none).
 */
class EndpointMemoryTest {
    private static final int PAGE = 4096;
    private static final long FIRST_VPN = 0x10000;
    private static final long BASE = FIRST_VPN * PAGE;

    @TempDir
    Path dir;

    private EndpointMemory sharedMemory(AtomicInteger faults) {
        MemoryFile memory = MemoryFile.create(dir.resolve("node.memory"), PAGE, 8, 0L);
        PageTableFile table = PageTableFile.create(dir.resolve("space.pages"), 1, Integer.numberOfTrailingZeros(PAGE), FIRST_VPN, 4);
        CpuMemory cpu = new CpuMemory(memory, table, 1, (address, length, write) -> {
            for (long page = address; page < address + length; page += PAGE) {
                faults.incrementAndGet();
                table.map(page / PAGE, (int) (page / PAGE - FIRST_VPN));
            }
        });
        EndpointMemory endpointMemory = new EndpointMemory(null); // no node to call: every access below must be direct
        endpointMemory.direct(cpu, null);
        return endpointMemory;
    }

    @Test
    void accessesInsideTheSharedRangeAreDirect() {
        AtomicInteger faults = new AtomicInteger();
        EndpointMemory memory = sharedMemory(faults);
        assertThat(memory.sharesMemory()).isTrue();
        memory.store(BASE + 10, new byte[] {1, 2, 3});
        assertThat(memory.load(BASE + 10, 3)).containsExactly(1, 2, 3);
        memory.storeLong(BASE + PAGE, 5);
        assertThat(memory.fetchAddLong(BASE + PAGE, 1)).isEqualTo(5);
        assertThat(memory.compareAndSwapLong(BASE + PAGE, 6, 8)).isEqualTo(6);
        assertThat(memory.loadLong(BASE + PAGE)).isEqualTo(8);
        ByteBuffer dst = ByteBuffer.allocate(3);
        memory.load(BASE + 10, dst);
        assertThat(dst.array()).containsExactly(1, 2, 3);
        assertThat(memory.storeAsync(BASE + 20, new byte[] {9})).isCompleted();
        assertThat(memory.loadAsync(BASE + 20, 1).join()).containsExactly(9);
        assertThat(faults.get()).as("each page faulted in once").isEqualTo(2);
    }

    @Test
    void aWaitOnAWordReturnsWhenAnotherThreadChangesIt() throws Exception {
        EndpointMemory memory = sharedMemory(new AtomicInteger());
        long word = BASE + 2 * PAGE;
        memory.storeLong(word, 1);
        CompletableFuture<Long> waiter = CompletableFuture.supplyAsync(() -> memory.awaitChange(word, 1, Duration.ofSeconds(30)));
        memory.storeLong(word, 2);
        assertThat(waiter.get(30, TimeUnit.SECONDS)).isEqualTo(2);
        assertThat(memory.awaitChange(word, 2, Duration.ofMillis(1))).as("unchanged until the timeout").isEqualTo(2);
    }
}
