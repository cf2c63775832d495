package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelContext;
import io.pagewire.proto.fabric.Opcode;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Unreliable connected (UC) queue pairs through the same NIC: WRITEs and SENDs complete once sent and
 * land as RC's do, nothing is acknowledged, and what cannot be taken is dropped and counted by cause
 * (a SEND with no receive posted, a message with a lost packet, a receive page not resident under
 * ON_DEMAND), the receive it would have filled staying posted for the next message.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class UnreliableConnectedTest {
    private static final int MTU = 1024;

    private final TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(16 << 20),
            new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(16 << 20), new NicContext().mtuBytes(MTU),
            new NicContext().mtuBytes(MTU));
    private final CompletionQueue sent = nics.a.createCompletionQueue();
    private final CompletionQueue received = nics.b.createCompletionQueue();
    private final QueuePair ua = nics.a.createQueuePair(nics.ea, sent, null, QueuePair.Transport.UC);
    private final QueuePair ub = nics.b.createQueuePair(nics.eb, received, null, QueuePair.Transport.UC);

    UnreliableConnectedTest() {
        ua.connect(ub.address());
        ub.connect(ua.address());
    }

    @AfterEach
    void close() {
        nics.close();
    }

    private MemoryRegion source(byte[] data) {
        long src = nics.ea.space().allocate(data.length);
        nics.ea.space().store(src, data, 0, data.length);
        return nics.ea.register(src, data.length, RegistrationMode.PINNED, Access.all());
    }

    private static byte[] bytes(int n, int seed) {
        byte[] data = new byte[n];
        for (int i = 0; i < n; i++) {
            data[i] = (byte) (i * 31 + seed);
        }
        return data;
    }

    private long drops(NicCounter cause) {
        return nics.b.counters().get(cause);
    }

    @Test
    void sendsAndWritesLandAndCompleteWithNoAcknowledgement() throws Exception {
        byte[] message = bytes(3 * MTU + 100, 1);
        MemoryRegion src = source(message);
        long dst = nics.eb.space().allocate(4 * MTU);
        MemoryRegion target = nics.eb.register(dst, 4 * MTU, RegistrationMode.PINNED, Access.all());
        long packetsFromB = nics.b.counters().get(NicCounter.PACKETS_SENT);

        ub.postReceive(new ReceiveRequest(7, target.lkey(), dst, 4 * MTU));
        ua.post(WorkRequest.send(1, src.lkey(), src.address(), message.length));
        assertThat(nics.takeSuccess(sent, "the SEND").wrId()).isEqualTo(1);
        Completion receive = nics.takeSuccess(received, "the receive");
        assertThat(receive.wrId()).isEqualTo(7);
        assertThat(receive.bytes()).isEqualTo(message.length);
        byte[] landed = new byte[message.length];
        nics.eb.space().load(dst, landed, 0, landed.length);
        assertThat(landed).isEqualTo(message);

        byte[] written = bytes(2 * MTU, 2);
        MemoryRegion src2 = source(written);
        ua.post(WorkRequest.write(2, src2.lkey(), src2.address(), written.length, dst, target.rkey()));
        nics.takeSuccess(sent, "the WRITE");
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        byte[] now = new byte[written.length];
        do {
            nics.eb.space().load(dst, now, 0, now.length);
        } while (!Arrays.equals(now, written) && System.nanoTime() < deadline);
        assertThat(now).as("the WRITE's data" + nics.state()).isEqualTo(written);
        assertThat(nics.b.counters().get(NicCounter.PACKETS_SENT) - packetsFromB).as("the UC responder sent nothing back" + nics.state())
                .isZero();
    }

    @Test
    void readsAndAtomicsAreRefusedAtPost() {
        MemoryRegion src = source(new byte[8]);
        assertThatThrownBy(() -> ua.post(WorkRequest.read(1, src.lkey(), src.address(), 8, 0x1000, 1))).isInstanceOf(NicException.class)
                .hasMessageContaining("UC carries WRITEs and SENDs");
        assertThatThrownBy(() -> ua.post(WorkRequest.fetchAdd(2, 0x1000, 1, 1))).isInstanceOf(NicException.class);
    }

    @Test
    void aSendWithNoReceivePostedIsDroppedAndTheNextOneLands() throws Exception {
        byte[] first = bytes(100, 3);
        byte[] second = bytes(200, 4);
        MemoryRegion a = source(first);
        MemoryRegion b = source(second);
        ua.post(WorkRequest.send(1, a.lkey(), a.address(), first.length));
        nics.takeSuccess(sent, "the unreceived SEND completes on the sender all the same");
        awaitCount(NicCounter.UNRELIABLE_DROPPED_NO_RECEIVE, 1);

        long dst = nics.eb.space().allocate(4096);
        MemoryRegion target = nics.eb.register(dst, 4096, RegistrationMode.PINNED, Access.all());
        ub.postReceive(new ReceiveRequest(9, target.lkey(), dst, 4096));
        ua.post(WorkRequest.send(2, b.lkey(), b.address(), second.length));
        nics.takeSuccess(sent, "the second SEND");
        Completion receive = nics.takeSuccess(received, "the second SEND's receive");
        assertThat(receive.bytes()).as("the dropped SEND left nothing behind").isEqualTo(second.length);
        assertThat(nics.b.counters().get(NicCounter.RNR_NAKS_SENT)).as("UC has no RNR").isZero();
    }

    @Test
    void aMessageThatLostAPacketIsDroppedAndItsReceiveTakesTheNext() throws Exception {
        long dst = nics.eb.space().allocate(8 * MTU);
        MemoryRegion target = nics.eb.register(dst, 8 * MTU, RegistrationMode.PINNED, Access.all());
        ub.postReceive(new ReceiveRequest(5, target.lkey(), dst, 8 * MTU));
        AtomicInteger middles = new AtomicInteger();
        nics.link.drop = p -> p.getOpcode() == Opcode.SEND_MIDDLE && middles.incrementAndGet() == 1;
        byte[] lost = bytes(3 * MTU, 5);
        MemoryRegion a = source(lost);
        ua.post(WorkRequest.send(1, a.lkey(), a.address(), lost.length));
        nics.takeSuccess(sent, "the SEND that lost a packet");
        awaitCount(NicCounter.UNRELIABLE_DROPPED_INCOMPLETE, 1);
        assertThat(received.poll()).as("no receive completes for an incomplete message").isNull();

        byte[] whole = bytes(2 * MTU + 7, 6);
        MemoryRegion b = source(whole);
        ua.post(WorkRequest.send(2, b.lkey(), b.address(), whole.length));
        nics.takeSuccess(sent, "the next SEND");
        Completion receive = nics.takeSuccess(received, "the receive");
        assertThat(receive.wrId()).as("the same receive, reused").isEqualTo(5);
        assertThat(receive.bytes()).isEqualTo(whole.length);
        byte[] landed = new byte[whole.length];
        nics.eb.space().load(dst, landed, 0, landed.length);
        assertThat(landed).isEqualTo(whole);
    }

    @Test
    void aReceiveThatFaultsUnderOnDemandIsDroppedThenTheFaultedInPageTakesTheNext() throws Exception {
        long dst = nics.eb.space().allocate(4096);
        MemoryRegion target = nics.eb.register(dst, 4096, RegistrationMode.ON_DEMAND, Access.all());
        nics.eb.space().pageOut(dst, 4096);
        ub.postReceive(new ReceiveRequest(1, target.lkey(), dst, 4096));
        ub.postReceive(new ReceiveRequest(2, target.lkey(), dst, 4096));
        byte[] data = bytes(500, 7);
        MemoryRegion a = source(data);
        ua.post(WorkRequest.send(1, a.lkey(), a.address(), data.length));
        nics.takeSuccess(sent, "the SEND");
        awaitCount(NicCounter.UNRELIABLE_DROPPED_FAULT, 1);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        // The NIC raised the fault, served beside the drop: the page comes in for the next message.
        while (faults() == 0 && System.nanoTime() < deadline) {
            Thread.sleep(2);
        }
        assertThat(faults()).as("receive-buffer faults the NIC raised" + nics.state()).isPositive();
        Completion receive = null;
        for (int i = 2; receive == null && System.nanoTime() < deadline; i++) {
            ua.post(WorkRequest.send(i, a.lkey(), a.address(), data.length));
            nics.takeSuccess(sent, "SEND " + i);
            receive = received.take(200, TimeUnit.MILLISECONDS);
        }
        assertThat(receive).as("a SEND lands once the page is in" + nics.state()).isNotNull();
        assertThat(receive.wrId()).as("the first receive, which the dropped message left posted").isEqualTo(1);
    }

    private long faults() {
        return nics.b.counters().get(NicCounter.RECEIVE_BUFFER_FAULTS_MINOR) + nics.b.counters().get(NicCounter.RECEIVE_BUFFER_FAULTS_MAJOR);
    }

    private void awaitCount(NicCounter counter, long at) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (drops(counter) < at && System.nanoTime() < deadline) {
            Thread.sleep(2);
        }
        assertThat(drops(counter)).as(counter + nics.state()).isEqualTo(at);
    }
}
