package io.pagewire.systemtests.verbs;

import static org.assertj.core.api.Assertions.assertThat;

import io.pagewire.ring.CompletionRecord;
import io.pagewire.ring.CpuUnmapRecord;
import io.pagewire.ring.MemoryFile;
import io.pagewire.ring.PostReceiveRecord;
import io.pagewire.ring.PostRecord;
import io.pagewire.ring.RefusedRecord;
import io.pagewire.ring.ScatterGatherRecord;
import io.pagewire.ring.SessionRings;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The ring file and records as the verbs library lays them out (verbs-c/src/layout.h) and as the
 * node's record classes do, checked both ways: the C side writes each kind and the Java accessors read
 * it back; the Java side writes each kind and the C side says whether every field is where layout.h
 * puts it. The values are the same on both sides (pagewire-layout-check's).
 */
class RecordLayoutTest {
    private static final long WR0_ID = 0x1111222233334444L;
    private static final int WR0_OPCODE = 1 | PostRecord.UNSIGNALED_FLAG | PostRecord.FENCE_FLAG; // WRITE
    private static final long WR1_ID = 0x5555666677778888L;
    private static final int WR1_OPCODE = 10 | PostRecord.SOLICITED_FLAG | PostRecord.DATAGRAM_FLAG; // COMPARE_SWAP
    private static final int SEND = 5;
    private static final int RECV = 8;
    private static final int FLUSHED = 9;

    @TempDir
    Path directory;

    private static Path program() {
        Path program = VerbsPrograms.DIRECTORY.resolve("bin/pagewire-layout-check");
        assertThat(program).as("the build makes " + program).exists();
        return program;
    }

    private static String run(String... command) throws IOException, InterruptedException {
        Process process = new ProcessBuilder(command).redirectErrorStream(true).start();
        assertThat(process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        String output = new String(process.getInputStream().readAllBytes());
        assertThat(process.exitValue()).as(output).isZero();
        return output;
    }

    private UnsafeBuffer read(String name) throws IOException {
        return new UnsafeBuffer(Files.readAllBytes(directory.resolve(name + ".c")));
    }

    @Test
    void recordsTheLibraryWritesReadBackThroughTheNodesClasses() throws Exception {
        run(program().toString(), "write", directory.toString());

        UnsafeBuffer post = read("post");
        assertThat(post.capacity()).isEqualTo(PostRecord.length(2));
        assertThat(PostRecord.isWellFormed(post, 0, post.capacity())).isTrue();
        assertThat(PostRecord.qpn(post, 0)).isEqualTo(0x01020304);
        expectWorkRequest(post, PostRecord.workRequest(0, 0), WR0_ID, WR0_OPCODE, 0);
        expectWorkRequest(post, PostRecord.workRequest(0, 1), WR1_ID, WR1_OPCODE, 1);

        UnsafeBuffer receive = read("receive");
        assertThat(PostReceiveRecord.isWellFormed(receive, 0, receive.capacity())).isTrue();
        assertThat(PostReceiveRecord.qpn(receive, 0)).isEqualTo(5);
        assertThat(PostReceiveRecord.srqId(receive, 0)).isEqualTo(6);
        int r = PostReceiveRecord.receive(0, 0);
        assertThat(PostReceiveRecord.wrId(receive, r)).isEqualTo(0x99);
        assertThat(PostReceiveRecord.lkey(receive, r)).isEqualTo(3);
        assertThat(PostReceiveRecord.length(receive, r)).isEqualTo(100);
        assertThat(PostReceiveRecord.address(receive, r)).isEqualTo(0x1000);

        UnsafeBuffer list = read("list");
        assertThat(ScatterGatherRecord.isWellFormed(list, ScatterGatherRecord.POST_TYPE, 0, list.capacity())).isTrue();
        assertThat(ScatterGatherRecord.qpn(list, 0)).isEqualTo(7);
        expectWorkRequest(list, ScatterGatherRecord.body(0), WR1_ID, SEND, 2);
        for (int i = 0; i < 3; i++) {
            int e = ScatterGatherRecord.element(ScatterGatherRecord.POST_TYPE, 0, i);
            assertThat(ScatterGatherRecord.lkey(list, e)).isEqualTo(10 + i);
            assertThat(ScatterGatherRecord.length(list, e)).isEqualTo(100 + i);
            assertThat(ScatterGatherRecord.address(list, e)).isEqualTo(0x2000L * (i + 1));
        }

        UnsafeBuffer completion = read("completion");
        assertThat(CompletionRecord.wrId(completion, 0)).isEqualTo(0xfeedL);
        assertThat(CompletionRecord.qpn(completion, 0)).isEqualTo(11);
        assertThat(CompletionRecord.opcode(completion, 0)).isEqualTo(RECV);
        assertThat(CompletionRecord.status(completion, 0)).isEqualTo(FLUSHED);
        assertThat(CompletionRecord.bytes(completion, 0)).isEqualTo(12345);
        assertThat(CompletionRecord.value(completion, 0)).isEqualTo(99);
        assertThat(CompletionRecord.hasImmediate(completion, 0)).isTrue();
        assertThat(CompletionRecord.solicited(completion, 0)).isTrue();
        assertThat(CompletionRecord.datagram(completion, 0)).isTrue();
        assertThat(CompletionRecord.globalRoute(completion, 0)).isTrue();
        assertThat(CompletionRecord.immediate(completion, 0)).isEqualTo(0x77);
        assertThat(CompletionRecord.timeNs(completion, 0)).isEqualTo(0x0123456789abcdefL);
        assertThat(CompletionRecord.error(completion, 0, completion.capacity())).isEqualTo("flushed");

        UnsafeBuffer refused = read("refused");
        assertThat(refused.capacity()).isEqualTo(RefusedRecord.length(5));
        assertThat(RefusedRecord.wrId(refused, 0)).isEqualTo(0xbadL);
        assertThat(RefusedRecord.qpn(refused, 0)).isEqualTo(12);
        assertThat(RefusedRecord.status(refused, 0)).isEqualTo(RefusedRecord.RESOURCE_EXHAUSTED);
        assertThat(RefusedRecord.error(refused, 0, refused.capacity())).isEqualTo("quota");

        UnsafeBuffer unmap = read("cpu_unmap");
        assertThat(unmap.capacity()).isEqualTo(CpuUnmapRecord.LENGTH);
        assertThat(unmap.getLong(0)).isEqualTo(0x7f0000001000L);
        assertThat(unmap.getLong(8)).isEqualTo(3 * 4096L);

        UnsafeBuffer rings = read("rings");
        assertThat(rings.capacity()).isEqualTo(SessionRings.HEADER_BYTES);
        assertThat(rings.getLong(0)).isEqualTo(SessionRings.MAGIC);

        assertThat(read("memory").byteArray()).as("the memory file's header as layout.h lays it out, against the node's own")
                .isEqualTo(memoryFileHeader());
    }

    /** The fields of the header of a real memory file of 16 frames of 4 KiB, as the node writes it. */
    private byte[] memoryFileHeader() throws IOException {
        MemoryFile memory = MemoryFile.create(directory.resolve("node.memory"), 4096, 16, 0L);
        try {
            return Arrays.copyOf(Files.readAllBytes(memory.path()), MemoryFile.HEADER_FIELDS_BYTES);
        } finally {
            memory.deleteFile();
        }
    }

    @Test
    void recordsTheNodesClassesWriteAreWhereTheLibraryLooks() throws Exception {
        UnsafeBuffer post = new UnsafeBuffer(new byte[PostRecord.length(2)]);
        PostRecord.putHeader(post, 0, 0x01020304, 2);
        putWorkRequest(post, PostRecord.workRequest(0, 0), WR0_ID, WR0_OPCODE, 0);
        putWorkRequest(post, PostRecord.workRequest(0, 1), WR1_ID, WR1_OPCODE, 1);
        write("post", post);

        UnsafeBuffer receive = new UnsafeBuffer(new byte[PostReceiveRecord.length(1)]);
        PostReceiveRecord.putHeader(receive, 0, 5, 6, 1);
        PostReceiveRecord.putReceive(receive, 0, 0, 0x99, 3, 0x1000, 100);
        write("receive", receive);

        UnsafeBuffer list = new UnsafeBuffer(new byte[ScatterGatherRecord.length(ScatterGatherRecord.POST_TYPE, 3)]);
        ScatterGatherRecord.putHeader(list, 0, 7, 0, 3);
        putWorkRequest(list, ScatterGatherRecord.body(0), WR1_ID, SEND, 2);
        for (int i = 0; i < 3; i++) {
            ScatterGatherRecord.putElement(list, ScatterGatherRecord.element(ScatterGatherRecord.POST_TYPE, 0, i), 10 + i, 0x2000L * (i + 1),
                    100 + i);
        }
        write("list", list);

        byte[] flushed = CompletionRecord.utf8("flushed");
        UnsafeBuffer completion = new UnsafeBuffer(new byte[CompletionRecord.length(flushed.length)]);
        CompletionRecord.put(completion, 0, 0xfeedL, 11, RECV, FLUSHED, 12345, 99,
                CompletionRecord.HAS_IMMEDIATE_FLAG | CompletionRecord.SOLICITED_FLAG | CompletionRecord.DATAGRAM_FLAG
                        | CompletionRecord.GLOBAL_ROUTE_FLAG, 0x77, 0x0123456789abcdefL, flushed);
        write("completion", completion);

        byte[] quota = CompletionRecord.utf8("quota");
        UnsafeBuffer refused = new UnsafeBuffer(new byte[RefusedRecord.length(quota.length)]);
        RefusedRecord.put(refused, 0, 0xbadL, 12, 8, quota);
        write("refused", refused);

        UnsafeBuffer unmap = new UnsafeBuffer(new byte[CpuUnmapRecord.LENGTH]);
        CpuUnmapRecord.put(unmap, 0, 0x7f0000001000L, 3 * 4096L);
        write("cpu_unmap", unmap);

        SessionRings rings = SessionRings.create(directory.resolve("session.rings"), 4096, 0x0102030405060708L);
        rings.nodeAsleep(true);
        byte[] header = new byte[SessionRings.HEADER_BYTES];
        System.arraycopy(Files.readAllBytes(rings.path()), 0, header, 0, header.length);
        Files.write(directory.resolve("rings.java"), header);
        rings.deleteFile();

        Files.write(directory.resolve("memory.java"), memoryFileHeader());

        String output = run(program().toString(), "read", directory.toString());
        assertThat(output).contains("PASSED").doesNotContain("FAIL");
    }

    private void write(String name, UnsafeBuffer record) throws IOException {
        Files.write(directory.resolve(name + ".java"), record.byteArray());
    }

    private static void putWorkRequest(UnsafeBuffer b, int at, long id, int opcodeAndFlags, int salt) {
        PostRecord.putWorkRequestAt(b, at, id, opcodeAndFlags & 0xFFFF, opcodeAndFlags & ~0xFFFF, 0x55 + salt, 0x7f0011223344L + salt,
                4096 + salt, 9 + salt, 0x6600aabbccddL + salt, 0x12345678L + salt, 77 + salt, 0xabcdef01 + salt, 88 + salt);
    }

    private static void expectWorkRequest(UnsafeBuffer b, int at, long id, int opcodeAndFlags, int salt) {
        assertThat(PostRecord.wrId(b, at)).isEqualTo(id);
        assertThat(PostRecord.opcode(b, at)).isEqualTo(opcodeAndFlags & 0xFFFF);
        assertThat(PostRecord.signaled(b, at)).isEqualTo((opcodeAndFlags & PostRecord.UNSIGNALED_FLAG) == 0);
        assertThat(PostRecord.fence(b, at)).isEqualTo((opcodeAndFlags & PostRecord.FENCE_FLAG) != 0);
        assertThat(PostRecord.solicited(b, at)).isEqualTo((opcodeAndFlags & PostRecord.SOLICITED_FLAG) != 0);
        assertThat(PostRecord.datagram(b, at)).isEqualTo((opcodeAndFlags & PostRecord.DATAGRAM_FLAG) != 0);
        assertThat(PostRecord.lkey(b, at)).isEqualTo(0x55 + salt);
        assertThat(PostRecord.localAddress(b, at)).isEqualTo(0x7f0011223344L + salt);
        assertThat(PostRecord.length(b, at)).isEqualTo(4096 + salt);
        assertThat(PostRecord.counterId(b, at)).isEqualTo(9 + salt);
        assertThat(PostRecord.remoteAddress(b, at)).isEqualTo(0x6600aabbccddL + salt);
        assertThat(PostRecord.rkey(b, at)).isEqualTo(0x12345678L + salt);
        assertThat(PostRecord.add(b, at)).isEqualTo(77 + salt);
        assertThat(PostRecord.immediate(b, at)).isEqualTo(0xabcdef01 + salt);
        assertThat(PostRecord.swap(b, at)).isEqualTo(88 + salt);
    }
}
