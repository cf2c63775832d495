package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelAgent;
import io.pagewire.kernel.KernelContext;
import io.pagewire.kernel.KernelCounter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * SEND/RECV and WRITE_WITH_IMM between two NICs on a direct link: messages land in posted receives in
 * order, a SEND with nothing posted is answered with RNR NAK and retried, a message longer than its
 * buffer fails on both sides, and receive buffers that were paged out are filled in every mode by
 * that mode's mechanism.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class SendReceiveTest {
    private static final int RECEIVER_MEMORY = 1 << 20;

    // A TLB whose pins (PIN_ON_MISS) fit well inside the receiver's pin limit.
    private final TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(16 << 20),
            new KernelContext().physicalMemoryBytes(RECEIVER_MEMORY).swapBytes(32 << 20),
            new NicContext().ackTimeoutNs(20_000_000).rnrDelayNs(2_000_000),
            new NicContext().ackTimeoutNs(20_000_000).rnrDelayNs(2_000_000).tlbEntries(64));
    private final Nic a = nics.a;
    private final Nic b = nics.b;
    private final KernelAgent kernelB = nics.kernelB;
    private final Endpoint ea = nics.ea;
    private final Endpoint eb = nics.eb;
    private final CompletionQueue cqa = nics.cqa;
    private final CompletionQueue cqb = nics.cqb;
    private final QueuePair qa = nics.qa;
    private final QueuePair qb = nics.qb;

    @AfterEach
    void close() {
        nics.close();
    }

    private String state() {
        return nics.state();
    }

    private Completion take(CompletionQueue cq, String what) throws InterruptedException {
        return nics.take(cq, what);
    }

    private MemoryRegion source(byte[] data, RegistrationMode mode) {
        long src = ea.space().allocate(Math.max(1, data.length));
        ea.space().store(src, data, 0, data.length);
        return ea.register(src, Math.max(1, data.length), mode, Access.all());
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void sendsLandInThePostedReceivesInOrderWithTheirLengthsAndImmediateData(RegistrationMode mode) throws Exception {
        int[] sizes = {0, 1, 100, 4096, 5000, 300_000};
        long[] buffers = new long[sizes.length];
        long total = 0;
        for (int size : sizes) {
            total += size + 64;
        }
        long base = eb.space().allocate(total);
        MemoryRegion receiveRegion = eb.register(base, total, mode, Access.all());
        long at = base;
        for (int i = 0; i < sizes.length; i++) {
            buffers[i] = at;
            qb.postReceive(new ReceiveRequest(100 + i, receiveRegion.lkey(), at, sizes[i] + 64));
            at += sizes[i] + 64;
        }
        List<byte[]> sent = new ArrayList<>();
        Random random = new Random(mode.ordinal());
        for (int i = 0; i < sizes.length; i++) {
            byte[] data = new byte[sizes[i]];
            random.nextBytes(data);
            sent.add(data);
            MemoryRegion src = source(data, mode);
            qa.post(i % 2 == 0 ? WorkRequest.send(i, src.lkey(), src.address(), data.length)
                    : WorkRequest.sendWithImm(i, src.lkey(), src.address(), data.length, 0xC0DE0000 + i));
        }
        for (int i = 0; i < sizes.length; i++) {
            Completion sentDone = take(cqa, "send " + i);
            assertThat(sentDone.status()).as(sentDone.error() + state()).isEqualTo(CompletionStatus.SUCCESS);
            assertThat(sentDone.wrId()).isEqualTo(i);
            Completion received = take(cqb, "receive " + i);
            assertThat(received.status()).as(received.error() + state()).isEqualTo(CompletionStatus.SUCCESS);
            assertThat(received.opcode()).isEqualTo(Completion.Opcode.RECV);
            assertThat(received.wrId()).as("the message went into the next posted receive").isEqualTo(100 + i);
            assertThat(received.bytes()).isEqualTo(sizes[i]);
            assertThat(received.hasImmediate()).isEqualTo(i % 2 == 1);
            if (i % 2 == 1) {
                assertThat(received.immediate()).isEqualTo(0xC0DE0000 + i);
            }
            byte[] landed = new byte[sizes[i]];
            eb.space().load(buffers[i], landed, 0, sizes[i]);
            assertThat(landed).as("message " + i).isEqualTo(sent.get(i));
        }
        assertThat(b.counters().get(NicCounter.RECEIVES_COMPLETED)).isEqualTo(sizes.length);
        assertThat(a.counters().get(NicCounter.SENDS_COMPLETED)).isEqualTo(sizes.length);
        assertThat(qb.postedReceives()).isZero();
    }

    /**
     * A SEND gathered from two elements on two pages, the first page's translation in the TLB and the
     * second's not: the kernel call for the second (a pin, a fault) sends what the outbox held first, and
     * the first element's bytes, staged already, must survive it. UCX's UD sends are such a pair (its
     * header, then the payload); the header came out overwritten by the payload (issue 53, MPI under
     * PIN_ON_MISS and ON_DEMAND).
     */
    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void aSendGatheredFromTwoPagesArrivesIntactWhenTheSecondPageMisses(RegistrationMode mode) throws Exception {
        int page = ea.space().pageSize();
        long src = ea.space().allocate(3L * page);
        byte[] header = bytes(24, 1);
        byte[] payload = bytes(200, 2);
        ea.space().store(src + 8, header, 0, header.length);
        ea.space().store(src + 2L * page + 16, payload, 0, payload.length);
        MemoryRegion region = ea.register(src, 3L * page, mode, Access.all());
        long dst = eb.space().allocate(4096);
        MemoryRegion receive = eb.register(dst, 4096, mode, Access.all());
        // First a SEND of the header's page alone: its translation is in the TLB (or resident) afterwards.
        qb.postReceive(new ReceiveRequest(1, receive.lkey(), dst, 4096));
        qa.post(WorkRequest.send(1, region.lkey(), src + 8, header.length));
        assertThat(take(cqa, "the warming send").status()).as(state()).isEqualTo(CompletionStatus.SUCCESS);
        assertThat(take(cqb, "the warming receive").status()).as(state()).isEqualTo(CompletionStatus.SUCCESS);

        qb.postReceive(new ReceiveRequest(2, receive.lkey(), dst, 4096));
        qa.post(new WorkRequest(2, Completion.Opcode.SEND, List.of(new Segment(region.lkey(), src + 8, header.length),
                new Segment(region.lkey(), src + 2L * page + 16, payload.length)), header.length + payload.length, 0, 0, 0, 0, true, 0, 0,
                false, false));
        assertThat(take(cqa, "the gathered send").status()).as(state()).isEqualTo(CompletionStatus.SUCCESS);
        Completion received = take(cqb, "the gathered receive");
        assertThat(received.status()).as(received.error() + state()).isEqualTo(CompletionStatus.SUCCESS);
        byte[] landed = new byte[header.length + payload.length];
        eb.space().load(dst, landed, 0, landed.length);
        byte[] expected = Arrays.copyOf(header, landed.length);
        System.arraycopy(payload, 0, expected, header.length, payload.length);
        assertThat(landed).as("header, then payload").isEqualTo(expected);
    }

    /**
     * Packets gathered from 3 KiB elements in one batch after a 1,000-byte WRITE: their payloads are staged
     * at offsets that are not multiples of the MTU, so the outbox's staging array (64 KiB at first) fills up
     * between the two elements of one packet, and that packet's pieces must come together in the next array.
     * (WRITEs into PINNED memory spend no credits, so both go out in one batch.)
     */
    @Test
    void aPacketWhoseElementsStraddleAFullStagingArrayArrivesWhole() throws Exception {
        int element = 3 * 1024;
        // 96 KiB in 24 packets, one batch with the first WRITE's: packet 16's payload starts 1,000 + 15 * 4,096 bytes
        // into the array, its first 3 KiB piece fits below 64 KiB and its second does not.
        int elements = 32;
        byte[] first = bytes(1000, 5);
        byte[] whole = bytes(element * elements, 6);
        MemoryRegion small = source(first, RegistrationMode.PINNED);
        MemoryRegion big = source(whole, RegistrationMode.PINNED);
        List<Segment> segments = new ArrayList<>();
        for (int i = 0; i < elements; i++) {
            segments.add(new Segment(big.lkey(), big.address() + (long) i * element, element));
        }
        long dst = eb.space().allocate(whole.length + 4096L);
        MemoryRegion target = eb.register(dst, whole.length + 4096L, RegistrationMode.PINNED, Access.all());
        qa.post(List.of(WorkRequest.write(1, small.lkey(), small.address(), first.length, dst, target.rkey()),
                new WorkRequest(2, Completion.Opcode.WRITE, segments, whole.length, dst + 4096, target.rkey(), 0, 0, true, 0, 0, false,
                        false)));
        for (int i = 1; i <= 2; i++) {
            Completion done = take(cqa, "write " + i);
            assertThat(done.status()).as(done.error() + state()).isEqualTo(CompletionStatus.SUCCESS);
        }
        byte[] landed = new byte[whole.length];
        eb.space().load(dst + 4096, landed, 0, landed.length);
        assertThat(landed).as("the gathered WRITE, element after element").isEqualTo(whole);
    }

    private static byte[] bytes(int length, int seed) {
        byte[] b = new byte[length];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void aSendWithNoReceivePostedIsAnsweredWithRnrAndLandsOnceOneIsPosted() throws Exception {
        byte[] data = "late receiver".getBytes();
        MemoryRegion src = source(data, RegistrationMode.PINNED);
        long dst = eb.space().allocate(4096);
        MemoryRegion dstRegion = eb.register(dst, 4096, RegistrationMode.PINNED, Access.all());
        qa.post(WorkRequest.send(1, src.lkey(), src.address(), data.length));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (b.counters().get(NicCounter.NO_RECEIVE_RNR_NAKS_SENT) < 2 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(b.counters().get(NicCounter.NO_RECEIVE_RNR_NAKS_SENT)).as("RNR NAKs while nothing is posted" + state())
                .isGreaterThanOrEqualTo(2);
        assertThat(cqa.poll()).as("the SEND waits, it does not fail").isNull();
        qb.postReceive(new ReceiveRequest(7, dstRegion.lkey(), dst, 4096));
        assertThat(take(cqa, "send").status()).isEqualTo(CompletionStatus.SUCCESS);
        Completion received = take(cqb, "receive");
        assertThat(received.wrId()).isEqualTo(7);
        assertThat(received.bytes()).isEqualTo(data.length);
        byte[] landed = new byte[data.length];
        eb.space().load(dst, landed, 0, data.length);
        assertThat(landed).isEqualTo(data);
        assertThat(cqb.poll()).as("exactly one receive completion").isNull();
    }

    @Test
    void rnrRetriesRunOutWhenNoReceiveIsEverPosted() throws Exception {
        try (TwoNics own = new TwoNics(new KernelContext().physicalMemoryBytes(1 << 20), new KernelContext().physicalMemoryBytes(1 << 20),
                new NicContext().rnrDelayNs(1_000_000).rnrRetryCount(3), new NicContext())) {
            long src = own.ea.space().allocate(64);
            MemoryRegion region = own.ea.register(src, 64, RegistrationMode.PINNED, Access.all());
            own.qa.post(WorkRequest.send(1, region.lkey(), src, 64));
            Completion c = own.take(own.cqa, "the send");
            assertThat(c.status()).as(c.error()).isEqualTo(CompletionStatus.RNR_RETRY_EXCEEDED);
        }
    }

    @Test
    void aMessageLongerThanItsReceiveBufferFailsOnBothSides() throws Exception {
        byte[] data = new byte[10_000];
        MemoryRegion src = source(data, RegistrationMode.PINNED);
        long dst = eb.space().allocate(2 * 8192);
        MemoryRegion dstRegion = eb.register(dst, 2 * 8192, RegistrationMode.PINNED, Access.all());
        qb.postReceive(new ReceiveRequest(1, dstRegion.lkey(), dst, 8192));
        qb.postReceive(new ReceiveRequest(2, dstRegion.lkey(), dst + 8192, 8192));
        qa.post(WorkRequest.send(9, src.lkey(), src.address(), data.length));
        Completion sent = take(cqa, "send");
        assertThat(sent.status()).isEqualTo(CompletionStatus.REMOTE_INVALID_REQUEST_ERROR);
        assertThat(sent.error()).contains("length error").contains("8192-byte receive buffer");
        Completion received = take(cqb, "receive");
        assertThat(received.wrId()).isEqualTo(1);
        assertThat(received.status()).isEqualTo(CompletionStatus.LOCAL_LENGTH_ERROR);
        Completion flushed = take(cqb, "the other receive");
        assertThat(flushed.wrId()).isEqualTo(2);
        assertThat(flushed.status()).as("the receiving queue pair failed, flushing what was posted").isEqualTo(CompletionStatus.FLUSHED);
        assertThat(qb.state()).isEqualTo(QueuePairState.ERROR);
    }

    @ParameterizedTest
    @EnumSource(RegistrationMode.class)
    void aWriteWithImmediateDataConsumesAReceiveAndReportsItsLength(RegistrationMode mode) throws Exception {
        byte[] data = new byte[70_000];
        new Random(3).nextBytes(data);
        MemoryRegion src = source(data, mode);
        long dst = eb.space().allocate(80_000);
        MemoryRegion dstRegion = eb.register(dst, 80_000, mode, Access.all());
        long unused = eb.space().allocate(64);
        MemoryRegion receiveRegion = eb.register(unused, 64, mode, Access.all());
        qa.post(WorkRequest.writeWithImm(5, src.lkey(), src.address(), data.length, dst + 100, dstRegion.rkey(), 0xFEEDBEEF));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (b.counters().get(NicCounter.NO_RECEIVE_RNR_NAKS_SENT) == 0 && System.nanoTime() < deadline) {
            Thread.sleep(1);
        }
        assertThat(b.counters().get(NicCounter.NO_RECEIVE_RNR_NAKS_SENT)).as("the immediate data waits for a receive" + state()).isPositive();
        qb.postReceive(new ReceiveRequest(44, receiveRegion.lkey(), unused, 64));
        assertThat(take(cqa, "write").status()).isEqualTo(CompletionStatus.SUCCESS);
        Completion received = take(cqb, "receive");
        assertThat(received.opcode()).isEqualTo(Completion.Opcode.RECV_RDMA_WITH_IMM);
        assertThat(received.wrId()).isEqualTo(44);
        assertThat(received.bytes()).isEqualTo(data.length);
        assertThat(received.hasImmediate()).isTrue();
        assertThat(received.immediate()).isEqualTo(0xFEEDBEEF);
        byte[] landed = new byte[data.length];
        eb.space().load(dst + 100, landed, 0, data.length);
        assertThat(landed).isEqualTo(data);
    }

    /**
     * Receive buffers twice the receiver's memory, each paged out again (by touching as much other
     * memory) before it is posted: every message lands, and the counters show each mode's mechanism.
     */
    @ParameterizedTest
    @EnumSource(value = RegistrationMode.class, names = {"PIN_ON_MISS", "SHADOW", "ON_DEMAND"})
    void receiveBuffersThatWerePagedOutAreFilledByEachModesMechanism(RegistrationMode mode) throws Exception {
        int messageBytes = 32 << 10;
        int messages = 2 * RECEIVER_MEMORY / messageBytes;
        long buffers = eb.space().allocate((long) messages * messageBytes);
        MemoryRegion receiveRegion = eb.register(buffers, (long) messages * messageBytes, mode, Access.all());
        long ballast = eb.space().allocate(2L * RECEIVER_MEMORY);
        byte[] data = new byte[messageBytes];
        MemoryRegion src = source(data, RegistrationMode.PINNED);
        int pageSize = kernelB.memory().pageSize();
        for (int i = 0; i < messages; i++) {
            long buffer = buffers + (long) i * messageBytes;
            eb.space().store(buffer, new byte[] {1}, 0, 1); // make it exist, then push it out
            for (long at = ballast; at < ballast + 2L * RECEIVER_MEMORY; at += pageSize) {
                eb.space().touch(at, true);
            }
            assertThat(eb.space().isResident(buffer >>> eb.space().pageShift())).as("buffer " + i + " was paged out").isFalse();
            qb.postReceive(new ReceiveRequest(i, receiveRegion.lkey(), buffer, messageBytes));
            Arrays.fill(data, (byte) i);
            ea.space().store(src.address(), data, 0, messageBytes);
            qa.post(WorkRequest.send(i, src.lkey(), src.address(), messageBytes));
            Completion sent = take(cqa, "send " + i);
            assertThat(sent.status()).as(sent.error() + state()).isEqualTo(CompletionStatus.SUCCESS);
            Completion received = take(cqb, "receive " + i);
            assertThat(received.status()).as(received.error() + state()).isEqualTo(CompletionStatus.SUCCESS);
            byte[] landed = new byte[messageBytes];
            eb.space().load(buffer, landed, 0, messageBytes);
            assertThat(landed).as("message " + i).containsOnly((byte) i);
        }
        long faults = b.counters().get(NicCounter.RECEIVE_BUFFER_FAULTS_MINOR, mode) + b.counters().get(NicCounter.RECEIVE_BUFFER_FAULTS_MAJOR, mode);
        switch (mode) {
            case PIN_ON_MISS -> {
                assertThat(faults).as("the NIC pinned (stalling) each missing buffer page" + state()).isPositive();
                assertThat(b.counters().get(NicCounter.RECEIVE_STALL_NANOS, mode)).as("time the lane stalled" + state()).isPositive();
            }
            case SHADOW -> {
                assertThat(b.counters().get(NicCounter.RECEIVE_BUFFER_PARKED_PARTS, mode)).as("parts parked in the system buffer" + state())
                        .isPositive();
                assertThat(nics.kernelB.counters().get(KernelCounter.SYSTEM_BUFFER_PARKED_BYTES)).as("bytes parked")
                        .isGreaterThanOrEqualTo(b.counters().get(NicCounter.RECEIVE_BUFFER_PARKED_PARTS, mode));
            }
            case ON_DEMAND -> {
                assertThat(b.counters().get(NicCounter.RECEIVE_BUFFER_RNR_NAKS_SENT)).as("RNR NAKs for buffer faults" + state()).isPositive();
                assertThat(faults).as("NIC page faults on the buffers" + state()).isPositive();
            }
            default -> throw new AssertionError(mode);
        }
        assertThat(b.counters().get(NicCounter.RECEIVE_FAULTS_MINOR) + b.counters().get(NicCounter.RECEIVE_FAULTS_MAJOR))
                .as("faults on receive buffers are not counted as RDMA-write target faults").isZero();
    }
}
