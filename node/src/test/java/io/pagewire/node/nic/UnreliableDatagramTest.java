package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelContext;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Unreliable datagram (UD) queue pairs through the same NIC: each SEND names its destination, any
 * sender's datagram lands after the 40-byte GRH with its source in the completion, nothing is
 * acknowledged, and what cannot be taken is dropped and counted by cause (a Q_Key not the pair's, no
 * receive posted, a receive page not resident under ON_DEMAND, no node at the address), never a hang.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class UnreliableDatagramTest {
    private static final int MTU = 1024;
    private static final int QKEY = 0x11111111;

    private final TwoNics nics = new TwoNics(new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(16 << 20),
            new KernelContext().physicalMemoryBytes(4 << 20).swapBytes(16 << 20), new NicContext().mtuBytes(MTU),
            new NicContext().mtuBytes(MTU));
    private final CompletionQueue sent = nics.a.createCompletionQueue();
    private final CompletionQueue received = nics.b.createCompletionQueue();
    private final QueuePair ua = datagramPair(nics.a, nics.ea, sent);
    private final QueuePair ub = datagramPair(nics.b, nics.eb, received);

    private static QueuePair datagramPair(Nic nic, Endpoint endpoint, CompletionQueue cq) {
        QueuePair qp = nic.createQueuePair(endpoint, cq, null, QueuePair.Transport.UD);
        qp.qkey(QKEY);
        qp.readyToReceive(null, ConnectionAttributes.defaults(nic.context()));
        qp.readyToSend(ConnectionAttributes.defaults(nic.context()));
        return qp;
    }

    @AfterEach
    void close() {
        nics.close();
    }

    private MemoryRegion source(Endpoint endpoint, byte[] data) {
        long src = endpoint.space().allocate(data.length);
        endpoint.space().store(src, data, 0, data.length);
        return endpoint.register(src, data.length, RegistrationMode.PINNED, Access.all());
    }

    private MemoryRegion receiveBuffer(int length, RegistrationMode mode) {
        long dst = nics.eb.space().allocate(length);
        return nics.eb.register(dst, length, mode, Access.all());
    }

    private static byte[] bytes(int n, int seed) {
        byte[] data = new byte[n];
        for (int i = 0; i < n; i++) {
            data[i] = (byte) (i * 31 + seed);
        }
        return data;
    }

    private static WorkRequest datagram(long wrId, MemoryRegion from, int length, QueuePair to, int qkey) {
        String node = to.address().node();
        return WorkRequest.send(wrId, from.lkey(), from.address(), length).to(new Datagram(node, Lids.of(node), to.qpn(), qkey, true));
    }

    @Test
    void datagramsFromTwoSendersLandAfterTheGrhWithTheirSourceInTheCompletion() throws Exception {
        QueuePair local = datagramPair(nics.b, nics.eb, nics.b.createCompletionQueue());
        MemoryRegion target = receiveBuffer(2 * (MTU + Datagram.GRH_BYTES), RegistrationMode.PINNED);
        ub.postReceive(new ReceiveRequest(1, target.lkey(), target.address(), MTU + Datagram.GRH_BYTES));
        ub.postReceive(new ReceiveRequest(2, target.lkey(), target.address() + MTU + Datagram.GRH_BYTES, MTU + Datagram.GRH_BYTES));
        byte[] remote = bytes(MTU, 1);
        byte[] same = bytes(300, 2);
        ua.post(datagram(1, source(nics.ea, remote), remote.length, ub, QKEY));
        nics.takeSuccess(sent, "the datagram from node a");
        Completion first = nics.takeSuccess(received, "the receive of a's datagram");
        local.post(datagram(2, source(nics.eb, same), same.length, ub, QKEY | Datagram.OWN_QKEY));
        Completion second = nics.takeSuccess(received, "the receive of b's own datagram (its pair's Q_Key, by the high bit)");

        assertThat(first.wrId()).isEqualTo(1);
        assertThat(first.bytes()).as("GRH and payload").isEqualTo(Datagram.GRH_BYTES + remote.length);
        assertThat(first.source()).isEqualTo(new Datagram("a", Lids.of("a"), ua.qpn(), QKEY, true));
        assertThat(second.source()).isEqualTo(new Datagram("b", Lids.of("b"), local.qpn(), QKEY, true));
        byte[] landed = new byte[Datagram.GRH_BYTES + remote.length];
        nics.eb.space().load(target.address(), landed, 0, landed.length);
        assertThat(Arrays.copyOfRange(landed, Datagram.GRH_BYTES, landed.length)).isEqualTo(remote);
        assertThat(landed[0] & 0xF0).as("IP version 6").isEqualTo(0x60);
        assertThat(landed[6]).as("next header: IBA transport").isEqualTo((byte) 0x1B);
        byte[] gid = new byte[16];
        Lids.gid("a", gid, 0);
        assertThat(Arrays.copyOfRange(landed, 8, 24)).as("source GID").isEqualTo(gid);
        Lids.gid("b", gid, 0);
        assertThat(Arrays.copyOfRange(landed, 24, 40)).as("destination GID").isEqualTo(gid);
        assertThat(nics.b.counters().get(NicCounter.PACKETS_SENT)).as("packets node b sent: its own datagram, no acknowledgement").isEqualTo(1);
    }

    @Test
    void aWrongQkeyNoReceiveNoNodeAndTooLongAreDroppedAndCountedAndTheSenderCompletes() throws Exception {
        byte[] data = bytes(200, 3);
        MemoryRegion src = source(nics.ea, data);
        ua.post(datagram(1, src, data.length, ub, QKEY));
        nics.takeSuccess(sent, "a datagram to a pair with no receive posted");
        awaitCount(nics.b, NicCounter.UNRELIABLE_DROPPED_NO_RECEIVE, 1);

        MemoryRegion target = receiveBuffer(MTU + Datagram.GRH_BYTES, RegistrationMode.PINNED);
        ub.postReceive(new ReceiveRequest(9, target.lkey(), target.address(), MTU + Datagram.GRH_BYTES));
        ua.post(datagram(2, src, data.length, ub, QKEY + 1));
        nics.takeSuccess(sent, "a datagram with the wrong Q_Key");
        awaitCount(nics.b, NicCounter.UNRELIABLE_DROPPED_QKEY, 1);

        ua.post(WorkRequest.send(3, src.lkey(), src.address(), data.length).to(new Datagram(null, 0x1234, ub.qpn(), QKEY, false)));
        nics.takeSuccess(sent, "a datagram to a LID no node has");
        assertThat(nics.a.counters().get(NicCounter.UNRELIABLE_DROPPED_UNREACHABLE)).isEqualTo(1);

        byte[] big = bytes(MTU + 1, 4);
        ua.post(datagram(4, source(nics.ea, big), big.length, ub, QKEY));
        nics.takeSuccess(sent, "a datagram longer than the MTU (completed, never sent: C10-93.1.1)");
        assertThat(nics.a.counters().get(NicCounter.UNRELIABLE_DROPPED_TOO_LONG)).isEqualTo(1);

        ua.post(datagram(5, src, data.length, ub, QKEY));
        Completion landed = nics.takeSuccess(received, "the receive, still posted after every drop");
        assertThat(landed.wrId()).isEqualTo(9);
        assertThat(landed.bytes()).isEqualTo(Datagram.GRH_BYTES + data.length);
    }

    @Test
    void aDatagramToANodeThatIsGoneIsDroppedAndCountedAndTheNextAfterItsReturnLands() throws Exception {
        byte[] data = bytes(64, 8);
        MemoryRegion src = source(nics.ea, data);
        MemoryRegion target = receiveBuffer(MTU + Datagram.GRH_BYTES, RegistrationMode.PINNED);
        ub.postReceive(new ReceiveRequest(1, target.lkey(), target.address(), MTU + Datagram.GRH_BYTES));
        nics.link.down("b");
        for (int i = 1; i <= 3; i++) {
            ua.post(datagram(i, src, data.length, ub, QKEY));
            nics.takeSuccess(sent, "datagram " + i + " to a node that is gone (completes: UD does not know)");
        }
        assertThat(nics.a.counters().get(NicCounter.UNRELIABLE_DROPPED_UNREACHABLE)).isEqualTo(3);
        assertThat(received.take(200, TimeUnit.MILLISECONDS)).as("a receive on the node that was gone").isNull();
        nics.link.up("b");
        ua.post(datagram(4, src, data.length, ub, QKEY));
        assertThat(nics.takeSuccess(received, "the datagram after the node's return").wrId()).isEqualTo(1);
    }

    @Test
    void aDatagramToAMulticastGroupReachesEveryAttachedPairOnEveryNodeAndNoneAfterTheyLeave() throws Exception {
        int group = 0xC123;
        CompletionQueue localReceived = nics.a.createCompletionQueue();
        QueuePair local = datagramPair(nics.a, nics.ea, localReceived);
        nics.a.attachMulticast(local, group);
        nics.b.attachMulticast(ub, group);
        assertThatThrownBy(() -> nics.b.attachMulticast(ub, group)).isInstanceOf(NicException.class).hasMessageContaining("already");
        assertThatThrownBy(() -> nics.b.attachMulticast(ub, 0x1234)).isInstanceOf(NicException.class).hasMessageContaining("multicast");
        MemoryRegion there = receiveBuffer(2 * (MTU + Datagram.GRH_BYTES), RegistrationMode.PINNED);
        ub.postReceive(new ReceiveRequest(1, there.lkey(), there.address(), MTU + Datagram.GRH_BYTES));
        ub.postReceive(new ReceiveRequest(2, there.lkey(), there.address() + MTU + Datagram.GRH_BYTES, MTU + Datagram.GRH_BYTES));
        long here = nics.ea.space().allocate(MTU + Datagram.GRH_BYTES);
        MemoryRegion hereRegion = nics.ea.register(here, MTU + Datagram.GRH_BYTES, RegistrationMode.PINNED, Access.all());
        local.postReceive(new ReceiveRequest(3, hereRegion.lkey(), here, MTU + Datagram.GRH_BYTES));
        byte[] data = bytes(100, 9);
        MemoryRegion src = source(nics.ea, data);
        WorkRequest toGroup = WorkRequest.send(1, src.lkey(), src.address(), data.length)
                .to(new Datagram(null, group, PacketRouter.MULTICAST_QPN, QKEY, true));
        ua.post(toGroup);
        Completion remote = nics.takeSuccess(received, "the group's datagram on node b");
        Completion same = nics.takeSuccess(localReceived, "the group's datagram on the sender's own node");
        assertThat(remote.source()).isEqualTo(new Datagram("a", Lids.of("a"), ua.qpn(), QKEY, true));
        assertThat(same.source().qpn()).isEqualTo(ua.qpn());
        byte[] landed = new byte[data.length];
        nics.eb.space().load(there.address() + Datagram.GRH_BYTES, landed, 0, landed.length);
        assertThat(landed).isEqualTo(data);

        nics.b.detachMulticast(ub, group);
        assertThatThrownBy(() -> nics.b.detachMulticast(ub, group)).isInstanceOf(NicException.class).hasMessageContaining("not attached");
        ua.post(toGroup);
        nics.takeSuccess(sent, "the first datagram");
        nics.takeSuccess(sent, "the datagram after node b's pair left");
        assertThat(received.take(300, TimeUnit.MILLISECONDS)).as("a datagram to a group node b's pair left").isNull();
    }

    @Test
    void aReceiveTooSmallForGrhAndPayloadFailsAloneAndThePairGoesOn() throws Exception {
        byte[] data = bytes(100, 5);
        MemoryRegion src = source(nics.ea, data);
        MemoryRegion target = receiveBuffer(4096, RegistrationMode.PINNED);
        ub.postReceive(new ReceiveRequest(1, target.lkey(), target.address(), data.length)); // no room for the GRH
        ub.postReceive(new ReceiveRequest(2, target.lkey(), target.address() + 1024, 1024));
        ua.post(datagram(1, src, data.length, ub, QKEY));
        Completion failed = nics.take(received, "the receive too small");
        assertThat(failed.status()).isEqualTo(CompletionStatus.LOCAL_LENGTH_ERROR);
        ua.post(datagram(2, src, data.length, ub, QKEY));
        assertThat(nics.takeSuccess(received, "the next receive").wrId()).isEqualTo(2);
        assertThat(ub.state()).isEqualTo(QueuePairState.READY);
    }

    @Test
    void aReceiveThatFaultsUnderOnDemandIsDroppedAndTheNextDatagramTakesTheFaultedInPage() throws Exception {
        MemoryRegion target = receiveBuffer(4096, RegistrationMode.ON_DEMAND);
        nics.eb.space().pageOut(target.address(), 4096);
        ub.postReceive(new ReceiveRequest(1, target.lkey(), target.address(), 4096));
        byte[] data = bytes(500, 7);
        MemoryRegion src = source(nics.ea, data);
        ua.post(datagram(1, src, data.length, ub, QKEY));
        nics.takeSuccess(sent, "the datagram");
        awaitCount(nics.b, NicCounter.UNRELIABLE_DROPPED_FAULT, 1);
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        Completion receive = null;
        for (int i = 2; receive == null && System.nanoTime() < deadline; i++) {
            ua.post(datagram(i, src, data.length, ub, QKEY));
            nics.takeSuccess(sent, "datagram " + i);
            receive = received.take(200, TimeUnit.MILLISECONDS);
        }
        assertThat(receive).as("a datagram lands once the page is in" + nics.state()).isNotNull();
        assertThat(receive.wrId()).as("the receive the dropped datagram left posted").isEqualTo(1);
    }

    @Test
    void onlySendsWithADestinationArePosted() {
        MemoryRegion src = source(nics.ea, bytes(64, 6));
        assertThatThrownBy(() -> ua.post(WorkRequest.write(1, src.lkey(), src.address(), 64, 0, 0)))
                .isInstanceOf(NicException.class).hasMessageContaining("UD");
        assertThatThrownBy(() -> ua.post(WorkRequest.send(2, src.lkey(), src.address(), 64)))
                .isInstanceOf(NicException.class).hasMessageContaining("destination");
    }

    private void awaitCount(Nic nic, NicCounter counter, long at) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (nic.counters().get(counter) < at && System.nanoTime() < deadline) {
            Thread.sleep(2);
        }
        assertThat(nic.counters().get(counter)).as(counter + nics.state()).isEqualTo(at);
    }
}
