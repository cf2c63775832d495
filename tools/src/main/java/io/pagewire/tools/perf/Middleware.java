package io.pagewire.tools.perf;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The middleware HPC and AI software sits on, run unmodified on a node pair through the verbs library and,
 * beside it, over TCP loopback on the same cores: UCX's {@code ucx_perftest -t tag_lat} and OpenMPI's
 * ping-pong ({@code pagewire-mpi-check}, {@code pml ucx} over Pagewire, {@code pml ob1} with {@code btl tcp}
 * over TCP). Each figure is null when its programs are not installed or the run failed.
 */
public final class Middleware {
    /** UCX registers pools larger than the default memlock limit; PIN_ON_MISS pins only what the NIC touches (docs/verbs.md). */
    static final String UCX_REGISTRATION = "PIN_ON_MISS";
    /** OpenMPI's ranks register PINNED, the library's default: a rank's pools fit the nodes' memlock limit. */
    static final String MPI_REGISTRATION = "PINNED";
    /** OpenMPI trusts only devices named mlx* unless told; the rest is what docs/verbs.md gives a user. */
    private static final List<String> MPI_OVER_PAGEWIRE = List.of("--mca", "pml", "ucx", "--mca", "osc", "ucx", "--mca", "btl", "^openib",
            "--mca", "opal_common_ucx_devices", "any");
    private static final List<String> MPI_OVER_TCP = List.of("--mca", "pml", "ob1", "--mca", "btl", "tcp,self", "--mca",
            "btl_tcp_if_include", "lo", "--mca", "osc", "^ucx");
    private static final Pattern PINGPONG = Pattern.compile("^pingpong (\\d+) ([\\d.]+)$", Pattern.MULTILINE);

    private final Path launcher;
    private final Path mpiCheck;
    private final String mpirun;
    private final Ucx ucx;
    private String failure;

    private Middleware(Path launcher, Path mpiCheck, String mpirun, Ucx ucx) {
        this.launcher = launcher;
        this.mpiCheck = mpiCheck;
        this.mpirun = mpirun;
        this.ucx = ucx;
    }

    /** The launcher and MPI program beside the verbs library {@link VerbsPerftest#library} finds, and the middleware on the PATH. */
    public static Middleware find() {
        Path library = VerbsPerftest.library();
        Path launcher = library == null ? null : existing(library.resolveSibling("bin/pagewire-run"));
        if (launcher == null && library != null && ExternalPrograms.onPath("pagewire-run") != null) {
            launcher = Path.of(ExternalPrograms.onPath("pagewire-run"));
        }
        Path mpiCheck = library == null ? null : existing(library.resolveSibling("bin/pagewire-mpi-check"));
        return new Middleware(launcher, mpiCheck, ExternalPrograms.onPath("mpirun"), Ucx.find());
    }

    private static Path existing(Path p) {
        return Files.isExecutable(p) ? p.toAbsolutePath() : null;
    }

    /** What the bench's header says of it. */
    public String describe() {
        List<String> missing = new ArrayList<>();
        if (launcher == null) {
            missing.add("the verbs library's launcher");
        }
        if (!ucx.available()) {
            missing.add("ucx_perftest");
        }
        if (mpirun == null || mpiCheck == null) {
            missing.add("OpenMPI or pagewire-mpi-check");
        }
        return missing.isEmpty() ? "Middleware: UCX (ucx_perftest) and OpenMPI (pagewire-mpi-check), over Pagewire and over TCP loopback."
                : "Middleware: partly not measured (" + String.join(", ", missing) + " not installed).";
    }

    /** Why the last figure was null, for the log. */
    String failure() {
        return failure;
    }

    /**
     * ucx_perftest's typical one-way latency in microseconds: over Pagewire through {@code transport}
     * ({@code rc_v}, {@code ud_v}) between the programs on {@code requester}'s and {@code responder}'s nodes,
     * or over TCP loopback when {@code transport} is {@code tcp}.
     */
    Double ucxTagLatencyUs(String transport, String requester, String responder, int size, int iterations, int warmup) {
        Map<String, String> env = ucxEnvironment(transport);
        if (env == null) {
            return null;
        }
        boolean tcp = transport.equals("tcp");
        Double us = ucx.tagLatencyUs(niced(tcp ? null : responder), niced(tcp ? null : requester), env, size, iterations, warmup);
        failure = ucx.failure();
        return us;
    }

    /** ucx_perftest's tag_bw in MB/s, over Pagewire through {@code transport} or over TCP loopback, as {@link #ucxTagLatencyUs}. */
    Double ucxTagBandwidthMbPerSec(String transport, String requester, String responder, int size, int iterations) {
        Map<String, String> env = ucxEnvironment(transport);
        if (env == null) {
            return null;
        }
        boolean tcp = transport.equals("tcp");
        Double mb = ucx.tagBandwidthMbPerSec(niced(tcp ? null : responder), niced(tcp ? null : requester), env, size, iterations,
                Math.max(10, iterations / 10));
        failure = ucx.failure();
        return mb;
    }

    /** UCX's environment for {@code transport} ({@code rc_v}, {@code ud_v} over Pagewire; {@code tcp} over loopback), or null when UCX cannot run. */
    private Map<String, String> ucxEnvironment(String transport) {
        boolean tcp = transport.equals("tcp");
        if (!ucx.available() || (!tcp && launcher == null)) {
            failure = "not installed";
            return null;
        }
        Map<String, String> env = new LinkedHashMap<>();
        env.put("UCX_TLS", transport);
        env.put("UCX_NET_DEVICES", tcp ? "lo" : "pagewire0:1");
        if (!tcp) {
            env.put("PAGEWIRE_VERBS_REGISTRATION", UCX_REGISTRATION);
        }
        return env;
    }

    /**
     * OpenMPI's ping-pong one-way time in microseconds at {@code size} bytes, two ranks: over Pagewire
     * ({@code pml ucx} through UCX's {@code transport}, one rank on each node) or, when both nodes are null,
     * over TCP loopback ({@code pml ob1}, {@code btl tcp}).
     */
    Double mpiPingPongUs(String transport, String requester, String responder, int size, int iterations) {
        if (mpirun == null || mpiCheck == null || (requester != null && launcher == null)) {
            failure = "not installed";
            return null;
        }
        boolean tcp = requester == null;
        List<String> line = new ArrayList<>(List.of(mpirun, "--allow-run-as-root", "--oversubscribe"));
        line.addAll(tcp ? MPI_OVER_TCP : MPI_OVER_PAGEWIRE);
        List<String> rank = List.of(mpiCheck.toString(), String.valueOf(iterations), String.valueOf(size), String.valueOf(size));
        if (tcp) {
            line.addAll(List.of("-np", "2"));
            line.addAll(rank);
        } else {
            line.addAll(List.of("-np", "1"));
            line.addAll(command(requester, rank));
            line.add(":");
            line.addAll(List.of("-np", "1"));
            line.addAll(command(responder, rank));
        }
        Map<String, String> env = new LinkedHashMap<>();
        if (!tcp) {
            env.put("UCX_TLS", transport);
            env.put("UCX_NET_DEVICES", "pagewire0:1");
            env.put("PAGEWIRE_VERBS_REGISTRATION", MPI_REGISTRATION);
        }
        String out = run(line, env, 300);
        if (out == null) {
            return null;
        }
        Matcher m = PINGPONG.matcher(out);
        while (m.find()) {
            if (Integer.parseInt(m.group(1)) == size) {
                return Double.parseDouble(m.group(2));
            }
        }
        failure = out.length() > 2000 ? out.substring(0, 2000) : out;
        return null;
    }

    /** {@code program} started through the launcher on {@code node}, or as it is when {@code node} is null (over TCP). */
    private List<String> command(String node, List<String> program) {
        List<String> line = new ArrayList<>();
        if (node != null) {
            line.addAll(List.of(launcher.toString(), "--node", node, "--"));
        }
        line.addAll(program);
        return line;
    }

    /** What starts a program below the nodes' priority ({@link VerbsPerftest#NICE}), through the launcher on {@code node} unless null. */
    private List<String> niced(String node) {
        List<String> line = new ArrayList<>(List.of("nice", "-n", String.valueOf(VerbsPerftest.NICE)));
        line.addAll(command(node, List.of()));
        return line;
    }

    /**
     * Runs a command to its end (at most {@code seconds}): its output, or null (and {@link #failure}) when it
     * could not start or did not end in time.
     */
    private String run(List<String> command, Map<String, String> env, int seconds) {
        Path output = null;
        try {
            output = Files.createTempFile("pagewire-middleware", ".out");
            Process p = ExternalPrograms.builder(niced(null), command, env).redirectOutput(output.toFile()).start();
            if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
                p.descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
                failure = String.join(" ", command) + " did not finish in " + seconds + " s";
                return null;
            }
            return Files.readString(output, StandardCharsets.UTF_8);
        } catch (IOException e) {
            failure = e.toString();
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            failure = "interrupted";
            return null;
        } finally {
            if (output != null) {
                try {
                    Files.deleteIfExists(output);
                } catch (IOException ignored) {
                    // a temporary file left behind is no reason to fail the run
                }
            }
        }
    }
}
