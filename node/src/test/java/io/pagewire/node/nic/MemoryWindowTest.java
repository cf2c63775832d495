package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.pagewire.kernel.KernelContext;
import java.util.EnumSet;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Memory windows as the NIC enforces them: a window's rkey admits exactly its range and rights, on
 * the right queue pair for type 2; binding anew retires the old key; LOCAL_INV and a peer's
 * SEND_WITH_INV end a type 2 window; and a bind completes in its place in the send queue.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MemoryWindowTest {
    private static final int SIZE = 1 << 16;
    private final TwoNics nics = new TwoNics(memory(), memory(), new NicContext().ackTimeoutNs(20_000_000).retryCount(1000),
            new NicContext().ackTimeoutNs(20_000_000).retryCount(1000));
    private final MemoryRegion src = nics.ea.register(nics.ea.space().allocate(SIZE), SIZE, RegistrationMode.PINNED, Access.all());
    private final MemoryRegion target = nics.eb.register(nics.eb.space().allocate(SIZE), SIZE, RegistrationMode.PINNED, Access.all());

    private static KernelContext memory() {
        return new KernelContext().physicalMemoryBytes(16 << 20).swapBytes(0);
    }

    @AfterEach
    void close() {
        nics.close();
    }

    private Completion writeThrough(long rkey, long at, int length) throws InterruptedException {
        nics.qa.post(WorkRequest.write(1, src.lkey(), src.address(), length, at, rkey));
        return nics.take(nics.cqa, "a write through rkey " + Long.toHexString(rkey));
    }

    private long bind(QueuePair qp, MemoryWindow window, int key, long at, long length, EnumSet<Access> access) throws InterruptedException {
        long rkey = (window.rkey() & ~0xFFL) | key;
        qp.post(WorkRequest.bindWindow(77, rkey, target.lkey(), at, length, access));
        Completion c = nics.take(nics.cqb, "the bind");
        assertThat(c.status()).as(c.toString()).isEqualTo(CompletionStatus.SUCCESS);
        assertThat(c.opcode()).isEqualTo(Completion.Opcode.BIND_WINDOW);
        return rkey;
    }

    @Test
    void aTypeOneWindowAdmitsExactlyItsRangeAndRightsAndARebindRetiresTheOldKey() throws InterruptedException {
        MemoryWindow window = nics.eb.allocateWindow(MemoryWindow.Type.ONE);
        assertThat(writeThrough(window.rkey(), target.address(), 8).status()).as("an unbound window admits nothing")
                .isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        nics.qa.close();
        nics.qb.close();
        QueuePair qa = nics.a.createQueuePair(nics.ea, nics.cqa);
        QueuePair qb = nics.b.createQueuePair(nics.eb, nics.cqb);
        qa.connect(qb.address());
        qb.connect(qa.address());
        long rkey = bind(qb, window, 1, target.address() + 4096, 8192, EnumSet.of(Access.REMOTE_WRITE));
        qa.post(WorkRequest.write(2, src.lkey(), src.address(), 8192, target.address() + 4096, rkey));
        assertThat(nics.takeSuccess(nics.cqa, "a write that fills the window").wrId()).isEqualTo(2);
        qa.post(WorkRequest.write(3, src.lkey(), src.address(), 8, target.address() + 4096 + 8192, rkey));
        Completion past = nics.take(nics.cqa, "a write just past the window");
        assertThat(past.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(past.error()).contains("outside the window");
    }

    @Test
    void windowRightsAndKeysAreEnforced() throws InterruptedException {
        MemoryWindow window = nics.eb.allocateWindow(MemoryWindow.Type.ONE);
        long rkey = bind(nics.qb, window, 1, target.address(), SIZE, EnumSet.of(Access.REMOTE_READ));
        nics.qa.post(WorkRequest.read(1, src.lkey(), src.address(), 64, target.address(), rkey));
        nics.takeSuccess(nics.cqa, "a read the window allows");
        Completion write = writeThrough(rkey, target.address(), 8);
        assertThat(write.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(write.error()).contains("does not allow REMOTE_WRITE");
    }

    @Test
    void rebindingRetiresTheOldKeyAndAZeroLengthBindUnbinds() throws InterruptedException {
        MemoryWindow window = nics.eb.allocateWindow(MemoryWindow.Type.ONE);
        long first = bind(nics.qb, window, 1, target.address(), SIZE, EnumSet.of(Access.REMOTE_READ));
        long second = bind(nics.qb, window, 2, target.address(), SIZE, EnumSet.of(Access.REMOTE_READ));
        nics.qa.post(WorkRequest.read(1, src.lkey(), src.address(), 64, target.address(), first));
        assertThat(nics.take(nics.cqa, "a read under the old key").status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        nics.qa.close();
        QueuePair qa = nics.a.createQueuePair(nics.ea, nics.cqa);
        nics.qb.close();
        QueuePair qb = nics.b.createQueuePair(nics.eb, nics.cqb);
        qa.connect(qb.address());
        qb.connect(qa.address());
        qa.post(WorkRequest.read(2, src.lkey(), src.address(), 64, target.address(), second));
        nics.takeSuccess(nics.cqa, "a read under the new key");
        qb.post(WorkRequest.bindWindow(78, (second & ~0xFFL) | 3, 0, 0, 0, EnumSet.noneOf(Access.class)));
        nics.takeSuccess(nics.cqb, "the unbinding");
        assertThat(target.windowsBound()).isZero();
        nics.eb.deregister(target);
    }

    @Test
    void aTypeTwoWindowServesItsOwnPairAndEndsByLocalOrRemoteInvalidation() throws InterruptedException {
        MemoryWindow window = nics.eb.allocateWindow(MemoryWindow.Type.TWO);
        long rkey = bind(nics.qb, window, 5, target.address(), SIZE, EnumSet.of(Access.REMOTE_WRITE, Access.REMOTE_READ));
        assertThat(writeThrough(rkey, target.address(), 64).status()).isEqualTo(CompletionStatus.SUCCESS);

        QueuePair otherA = nics.a.createQueuePair(nics.ea, nics.cqa);
        QueuePair otherB = nics.b.createQueuePair(nics.eb, nics.cqb);
        otherA.connect(otherB.address());
        otherB.connect(otherA.address());
        otherA.post(WorkRequest.write(9, src.lkey(), src.address(), 8, target.address(), rkey));
        Completion elsewhere = nics.take(nics.cqa, "a write through the window on another pair");
        assertThat(elsewhere.status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
        assertThat(elsewhere.error()).contains("bound by queue pair " + nics.qb.qpn());

        nics.qb.post(WorkRequest.bindWindow(79, (rkey & ~0xFFL) | 6, target.lkey(), target.address(), 64, EnumSet.of(Access.REMOTE_READ)));
        Completion again = nics.take(nics.cqb, "a second bind of a bound type 2 window");
        assertThat(again.status()).isEqualTo(CompletionStatus.MEMORY_WINDOW_BIND_ERROR);
        assertThat(again.error()).contains("invalidate it first");
        assertThat(nics.qb.state()).isEqualTo(QueuePairState.ERROR);

        QueuePair qb = nics.b.reset(nics.qb);
        QueuePair qa = nics.a.reset(nics.qa);
        qa.connect(qb.address());
        qb.connect(qa.address());
        qb.post(WorkRequest.localInvalidate(80, rkey));
        assertThat(nics.takeSuccess(nics.cqb, "LOCAL_INV").opcode()).isEqualTo(Completion.Opcode.LOCAL_INVALIDATE);
        long rebound = bind(qb, window, 7, target.address(), SIZE, EnumSet.of(Access.REMOTE_WRITE));
        qa.post(WorkRequest.write(10, src.lkey(), src.address(), 8, target.address(), rebound));
        nics.takeSuccess(nics.cqa, "a write through the window bound again after LOCAL_INV");

        qb.postReceive(new ReceiveRequest(81, target.lkey(), target.address() + 8192, 64));
        qa.post(WorkRequest.sendWithInvalidate(11, src.lkey(), src.address(), 64, rebound));
        nics.takeSuccess(nics.cqa, "SEND_WITH_INV");
        Completion received = nics.takeSuccess(nics.cqb, "the receive of a SEND_WITH_INV");
        assertThat(received.invalidated()).isTrue();
        assertThat(Integer.toUnsignedLong(received.immediate())).isEqualTo(rebound);
        assertThat(received.hasImmediate()).isFalse();
        qa.post(WorkRequest.write(12, src.lkey(), src.address(), 8, target.address(), rebound));
        assertThat(nics.take(nics.cqa, "a write after the peer's invalidation").status()).isEqualTo(CompletionStatus.REMOTE_ACCESS_ERROR);
    }

    @Test
    void aRegionWithABoundWindowCannotBeDeregisteredAndABindCompletesInItsPlace() throws InterruptedException {
        MemoryWindow window = nics.eb.allocateWindow(MemoryWindow.Type.ONE);
        nics.link.drop = p -> true; // a write of b's stays outstanding
        nics.qb.post(WorkRequest.write(1, target.lkey(), target.address(), 8, src.address(), src.rkey()));
        long rkey = (window.rkey() & ~0xFFL) | 1;
        nics.qb.post(WorkRequest.bindWindow(2, rkey, target.lkey(), target.address(), 64, EnumSet.of(Access.REMOTE_READ)));
        assertThat(nics.cqb.take(200, TimeUnit.MILLISECONDS)).as("the bind waits for the write before it to complete").isNull();
        assertThat(target.windowsBound()).as("but it is in force already").isEqualTo(1);
        assertThatThrownBy(() -> nics.eb.deregister(target)).isInstanceOf(NicException.class).hasMessageContaining("memory windows bound");
        nics.link.drop = p -> false;
        assertThat(nics.takeSuccess(nics.cqb, "the write").wrId()).isEqualTo(1);
        assertThat(nics.takeSuccess(nics.cqb, "the bind, after it").wrId()).isEqualTo(2);
        nics.eb.deallocateWindow(rkey);
        assertThat(target.windowsBound()).isZero();
        nics.eb.deregister(target);
    }
}
