package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.kernel.KernelContext;
import io.pagewire.proto.fabric.Opcode;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.logging.Handler;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Packets no honest peer sends are refused or dropped and counted, and the responder carries on serving the queue pair. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MalformedPacketsTest {
    private static final int PAGE = 4096;

    private static KernelContext small() {
        return new KernelContext().physicalMemoryBytes(8 << 20).swapBytes(0);
    }

    @Test
    void malformedPacketsAreRefusedAndTheResponderCarriesOn() throws Exception {
        try (TwoNics nics = new TwoNics(small(), small(), new NicContext(), new NicContext())) {
            MemoryRegion src = nics.ea.register(nics.ea.space().allocate(PAGE), PAGE, RegistrationMode.PINNED, Access.all());
            MemoryRegion dst = nics.eb.register(nics.eb.space().allocate(PAGE), PAGE, RegistrationMode.PINNED, Access.all());
            int toQp = nics.qb.qpn();
            int fromQp = nics.qa.qpn();
            PacketBatch garbage = new PacketBatch();
            garbage.add().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(0).setOpcode(Opcode.OPCODE_UNSPECIFIED);
            garbage.add().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(1).setOpcode(Opcode.WRITE_ONLY)
                    .setRkey(dst.rkey()).setRemoteAddress(dst.address()).setPayload(new byte[100_000]);
            garbage.add().setDstQpn(9999).setSrcQpn(fromQp).setPsn(0).setOpcode(Opcode.WRITE_ONLY);
            garbage.add().setDstQpn(toQp).setSrcQpn(77).setPsn(0).setOpcode(Opcode.WRITE_ONLY);
            // PSNs of 2^63 and above (negative as a Java long) once indexed the replay cache out of bounds.
            garbage.add().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(-5).setOpcode(Opcode.FETCH_ADD);
            garbage.add().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(Long.MIN_VALUE).setOpcode(Opcode.READ_REQUEST)
                    .setLength(8).setRkey(dst.rkey()).setRemoteAddress(dst.address());
            // An opcode number no build knows, as a peer of a later version might send.
            garbage.add().setDstQpn(toQp).setSrcQpn(fromQp).setPsn(2).setOpcodeValue(250);
            List<String> thrown = new CopyOnWriteArrayList<>();
            Logger nicLog = Logger.getLogger(Nic.class.getPackageName());
            Handler capture = new Handler() {
                @Override
                public void publish(LogRecord record) {
                    if (record.getThrown() != null) {
                        thrown.add(record.getMessage() + ": " + record.getThrown());
                    }
                }

                @Override
                public void flush() {
                }

                @Override
                public void close() {
                }
            };
            nicLog.addHandler(capture);
            try {
                nics.b.router().receive("a", garbage);
                nics.b.router().receive("c", garbage);
            } finally {
                nicLog.removeHandler(capture);
            }
            assertThat(nics.b.counters().get(NicCounter.INVALID_REQUEST_NAKS_SENT)).as(nics.state()).isPositive();
            assertThat(nics.b.counters().get(NicCounter.DROPPED_PACKETS)).as(nics.state()).isGreaterThanOrEqualTo(2);
            assertThat(thrown).as("nothing failed with an exception on the way").isEmpty();

            // The garbage made the responder NAK the requester's queue pair; a fresh pair still works.
            CompletionQueue cq = nics.a.createCompletionQueue();
            QueuePair qa2 = nics.a.createQueuePair(nics.ea, cq);
            QueuePair qb2 = nics.b.createQueuePair(nics.eb, nics.b.createCompletionQueue());
            qa2.connect(qb2.address());
            qb2.connect(qa2.address());
            qa2.post(WorkRequest.write(7, src.lkey(), src.address(), 64, dst.address(), dst.rkey()));
            assertThat(nics.takeSuccess(cq, "a write after the garbage").wrId()).isEqualTo(7);
        }
    }
}
