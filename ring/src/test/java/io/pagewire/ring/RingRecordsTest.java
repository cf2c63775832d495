package io.pagewire.ring;

import static org.assertj.core.api.Assertions.assertThat;

import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

/** Each record reads back what was written, at the offsets its diagram gives, and a node refuses one whose lengths disagree. */
class RingRecordsTest {
    @Test
    void aPostReadsBackEveryFieldAtItsDocumentedOffset() {
        UnsafeBuffer b = new UnsafeBuffer(new byte[PostRecord.length(2) + 8]);
        PostRecord.putHeader(b, 8, 5, 2);
        PostRecord.putWorkRequest(b, 8, 1, 99, 7, false, 3, 0x1000, 64, 11, 0x2000, 0xABCDL, 17, 0x1234, 23);
        int wr = PostRecord.workRequest(8, 1);
        assertThat(wr).isEqualTo(8 + 8 + 72);
        assertThat(b.getLong(wr)).isEqualTo(99);
        assertThat(b.getInt(wr + 8)).isEqualTo(7 | PostRecord.UNSIGNALED_FLAG);
        assertThat(b.getLong(wr + 32)).isEqualTo(0x2000);
        assertThat(b.getLong(wr + 64)).isEqualTo(23);
        assertThat(PostRecord.qpn(b, 8)).isEqualTo(5);
        assertThat(PostRecord.opcode(b, wr)).isEqualTo(7);
        assertThat(PostRecord.signaled(b, wr)).isFalse();
        assertThat(PostRecord.lkey(b, wr)).isEqualTo(3);
        assertThat(PostRecord.length(b, wr)).isEqualTo(64);
        assertThat(PostRecord.counterId(b, wr)).isEqualTo(11);
        assertThat(PostRecord.rkey(b, wr)).isEqualTo(0xABCDL);
        assertThat(PostRecord.add(b, wr)).isEqualTo(17);
        assertThat(PostRecord.immediate(b, wr)).isEqualTo(0x1234);
        assertThat(PostRecord.isWellFormed(b, 8, PostRecord.length(2))).isTrue();
    }

    @Test
    void recordsWhoseCountsDisagreeWithTheirLengthAreMalformed() {
        UnsafeBuffer b = new UnsafeBuffer(new byte[256]);
        PostRecord.putHeader(b, 0, 1, 3);
        assertThat(PostRecord.isWellFormed(b, 0, PostRecord.length(2))).isFalse();
        PostRecord.putHeader(b, 0, 1, -1);
        assertThat(PostRecord.isWellFormed(b, 0, PostRecord.length(0))).isFalse();
        PostRecord.putHeader(b, 0, 1, Integer.MAX_VALUE / 8);
        assertThat(PostRecord.isWellFormed(b, 0, 200)).as("a count whose length overflows").isFalse();
        assertThat(PostRecord.isWellFormed(b, 0, 4)).as("shorter than a header").isFalse();
        PostReceiveRecord.putHeader(b, 0, 1, 0, 2);
        assertThat(PostReceiveRecord.isWellFormed(b, 0, PostReceiveRecord.length(2))).isTrue();
        assertThat(PostReceiveRecord.isWellFormed(b, 0, PostReceiveRecord.length(1))).isFalse();
    }

    @Test
    void eachRingsRecordTypesAreDistinct() {
        assertThat(java.util.List.of(PostRecord.TYPE, PostReceiveRecord.TYPE, FaultRecord.TYPE, ScatterGatherRecord.POST_TYPE,
                ScatterGatherRecord.RECEIVE_TYPE)).as("the request ring's").doesNotHaveDuplicates();
        assertThat(java.util.List.of(CompletionRecord.TYPE, RefusedRecord.TYPE, CounterRecord.TYPE, FaultServedRecord.TYPE,
                CpuUnmapRecord.TYPE)).as("the event ring's").doesNotHaveDuplicates();
    }

    @Test
    void aScatterGatherPostCarriesItsRequestThenItsElements() {
        UnsafeBuffer b = new UnsafeBuffer(new byte[ScatterGatherRecord.length(ScatterGatherRecord.POST_TYPE, 3)]);
        ScatterGatherRecord.putHeader(b, 0, 5, 0, 3);
        PostRecord.putWorkRequestAt(b, ScatterGatherRecord.body(0), 77, 5, PostRecord.FENCE_FLAG | PostRecord.SOLICITED_FLAG, 0, 0, 0, 0, 0,
                0, 0, 0, 0);
        for (int i = 0; i < 3; i++) {
            ScatterGatherRecord.putElement(b, ScatterGatherRecord.element(ScatterGatherRecord.POST_TYPE, 0, i), 10 + i, 0x1000L * i, 100 + i);
        }
        int wr = ScatterGatherRecord.body(0);
        assertThat(wr).isEqualTo(16);
        assertThat(PostRecord.wrId(b, wr)).isEqualTo(77);
        assertThat(PostRecord.fence(b, wr)).isTrue();
        assertThat(PostRecord.solicited(b, wr)).isTrue();
        assertThat(PostRecord.signaled(b, wr)).isTrue();
        int third = ScatterGatherRecord.element(ScatterGatherRecord.POST_TYPE, 0, 2);
        assertThat(third).isEqualTo(16 + 72 + 32);
        assertThat(ScatterGatherRecord.lkey(b, third)).isEqualTo(12);
        assertThat(ScatterGatherRecord.length(b, third)).isEqualTo(102);
        assertThat(ScatterGatherRecord.address(b, third)).isEqualTo(0x2000);
        assertThat(ScatterGatherRecord.isWellFormed(b, ScatterGatherRecord.POST_TYPE, 0, b.capacity())).isTrue();
        assertThat(ScatterGatherRecord.isWellFormed(b, ScatterGatherRecord.RECEIVE_TYPE, 0, b.capacity())).as("the other kind's length").isFalse();
        ScatterGatherRecord.putHeader(b, 0, 5, 0, ScatterGatherRecord.MAX_ELEMENTS + 1);
        assertThat(ScatterGatherRecord.isWellFormed(b, ScatterGatherRecord.POST_TYPE, 0,
                ScatterGatherRecord.length(ScatterGatherRecord.POST_TYPE, ScatterGatherRecord.MAX_ELEMENTS + 1))).isFalse();
    }

    @Test
    void eventsReadBackAndAnErrorLongerThanItsRecordIsNotRead() {
        UnsafeBuffer b = new UnsafeBuffer(new byte[256]);
        byte[] error = CompletionRecord.utf8("lkey 3 is not registered");
        CompletionRecord.put(b, 0, 42, 9, 3, 2, 4096, 7, true, 0x55, error);
        assertThat(CompletionRecord.wrId(b, 0)).isEqualTo(42);
        assertThat(CompletionRecord.qpn(b, 0)).isEqualTo(9);
        assertThat(CompletionRecord.opcode(b, 0)).isEqualTo(3);
        assertThat(CompletionRecord.status(b, 0)).isEqualTo(2);
        assertThat(CompletionRecord.bytes(b, 0)).isEqualTo(4096);
        assertThat(CompletionRecord.value(b, 0)).isEqualTo(7);
        assertThat(CompletionRecord.hasImmediate(b, 0)).isTrue();
        assertThat(CompletionRecord.immediate(b, 0)).isEqualTo(0x55);
        assertThat(CompletionRecord.error(b, 0, CompletionRecord.length(error.length))).isEqualTo("lkey 3 is not registered");
        assertThat(CompletionRecord.error(b, 0, CompletionRecord.FIXED_BYTES + 3)).isNull();
        RefusedRecord.put(b, 100, 5, 6, RefusedRecord.RESOURCE_EXHAUSTED, CompletionRecord.utf8("full"));
        assertThat(RefusedRecord.error(b, 100, RefusedRecord.length(4))).isEqualTo("full");
        assertThat(RefusedRecord.wrId(b, 100)).isEqualTo(5);
        assertThat(RefusedRecord.qpn(b, 100)).isEqualTo(6);
        assertThat(RefusedRecord.status(b, 100)).isEqualTo(RefusedRecord.RESOURCE_EXHAUSTED);
        CounterRecord.put(b, 200, 4, 77);
        assertThat(CounterRecord.counterId(b, 200)).isEqualTo(4);
        assertThat(CounterRecord.value(b, 200)).isEqualTo(77);
    }
}
