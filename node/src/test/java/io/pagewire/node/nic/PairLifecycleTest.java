package io.pagewire.node.nic;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/**
 * The queue pair's state machine without a NIC: the transitions {@code ibv_modify_qp} may take from
 * each state and the words of a refused one, the sequence numbers each RTS keeps, and the events
 * raised once each (QueuePairStatesTest runs the same through two NICs).
 */
class PairLifecycleTest {
    private final PairLifecycle life = new PairLifecycle(5, attributes(0, 0));

    private static ConnectionAttributes attributes(long sendPsn, long receivePsn) {
        return new ConnectionAttributes(sendPsn, receivePsn, 1_000_000, 7, 7, 10_000);
    }

    @Test
    void initReadyToReceiveReadyDrainingAndBackIsTheWayToSend() {
        assertThat(life.state()).isEqualTo(QueuePairState.INIT);
        assertThatThrownBy(life::checkMayPost).hasMessageContaining("queue pair 5 is not connected for sending yet (it is INIT");
        assertThatThrownBy(life::checkMayBecomeReady).hasMessageContaining("cannot become ready to send: it is INIT");
        assertThatThrownBy(life::drain).hasMessageContaining("cannot drain its send queue: it is INIT, not READY");
        assertThat(life.takesReceives()).as("receives may be posted before connecting").isTrue();

        life.checkMayConnect();
        life.readyToReceive(attributes(0, 300));
        assertThat(life.receiving()).isTrue();
        assertThat(life.sending()).isFalse();
        assertThatThrownBy(life::checkMayConnect).hasMessageContaining("cannot connect: it is READY_TO_RECEIVE");

        life.checkMayBecomeReady();
        assertThat(life.firstReady()).isTrue();
        life.ready(attributes(100, 999));
        assertThat(life.state()).isEqualTo(QueuePairState.READY);
        assertThat(life.attributes().sendPsn()).as("the first RTS's send PSN").isEqualTo(100);
        assertThat(life.attributes().receivePsn()).as("RTR's receive PSN").isEqualTo(300);
        life.checkMayPost();

        assertThat(life.drain()).isTrue();
        assertThat(life.drain()).as("a second drain is nothing").isFalse();
        assertThat(life.sending()).as("SQD finishes what it started").isTrue();
        life.checkMayBecomeReady();
        assertThat(life.firstReady()).isFalse();
        life.ready(new ConnectionAttributes(555, 666, 2_000_000, 3, 1, 20_000));
        assertThat(life.attributes()).as("a later RTS changes the timers, never the sequence numbers")
                .isEqualTo(new ConnectionAttributes(100, 300, 2_000_000, 3, 1, 20_000));
        assertThat(life.takeEvents()).isNull();
    }

    @Test
    void theFirstRequestInReadyToReceiveEstablishesTheConnectionOnce() {
        life.readyToReceive(attributes(0, 0));
        life.requestArrived();
        life.requestArrived();
        assertThat(life.takeEvents()).containsExactly(QueuePairEvent.COMMUNICATION_ESTABLISHED);
        life.ready(attributes(0, 0));
        life.requestArrived();
        assertThat(life.takeEvents()).isNull();
    }

    @Test
    void aDrainIsReportedOnceWhenWhatItStartedIsDone() {
        life.readyToReceive(attributes(0, 0));
        life.ready(attributes(0, 0));
        life.drain();
        life.checkDrained(false);
        assertThat(life.takeEvents()).isNull();
        life.checkDrained(true);
        life.checkDrained(true);
        assertThat(life.takeEvents()).containsExactly(QueuePairEvent.SEND_QUEUE_DRAINED);
        life.ready(attributes(0, 0));
        life.drain();
        life.checkDrained(true);
        assertThat(life.takeEvents()).as("each drain reports once").containsExactly(QueuePairEvent.SEND_QUEUE_DRAINED);
    }

    @Test
    void errorFlushesWithItsReasonAndRaisesWhatTheNicsOwnMoveRaises() {
        life.readyToReceive(attributes(0, 0));
        life.ready(attributes(0, 0));
        life.fail("the peer refused", true, true);
        assertThat(life.state()).isEqualTo(QueuePairState.ERROR);
        assertThat(life.receiving()).isFalse();
        assertThat(life.ended()).isTrue();
        assertThat(life.takesReceives()).as("a receive posted in ERROR is flushed").isFalse();
        assertThat(life.flushedBecause()).isEqualTo("queue pair 5 is ERROR after an earlier failure: the peer refused");
        life.checkMayPost(); // taken, to complete as flushed
        assertThatThrownBy(life::checkMayBecomeReady).hasMessageContaining("it is ERROR");
        assertThatThrownBy(life::checkMayConnect).hasMessageContaining("cannot connect: it is ERROR; reset it first");
        assertThat(life.takeEvents()).containsExactly(QueuePairEvent.FATAL, QueuePairEvent.LAST_WQE_REACHED);

        PairLifecycle owners = new PairLifecycle(6, attributes(0, 0));
        owners.fail("moved by its owner", false, false);
        assertThat(owners.takeEvents()).as("the owner's own move raises nothing").isNull();
    }

    @Test
    void closedIsForGood() {
        assertThat(life.close()).isTrue();
        assertThat(life.close()).isFalse();
        assertThat(life.ended()).isTrue();
        assertThatThrownBy(life::takesReceives).hasMessage("queue pair 5 is closed");
        assertThatThrownBy(life::checkMayConnect).hasMessageContaining("cannot connect: it is CLOSED");
    }
}
