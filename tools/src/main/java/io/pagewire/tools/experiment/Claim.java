package io.pagewire.tools.experiment;

/**
 * One of a paper's claims as an experiment checked it.
 *
 * @param statement the claim, in the paper's terms
 * @param reproduced whether the measurements bear it out
 * @param evidence the figures that decided it, and by how much
 */
public record Claim(String statement, boolean reproduced, String evidence) {
    /** The claim's line at the end of a run: {@code reproduced: ...} or {@code NOT reproduced: ...}. */
    public String line() {
        return (reproduced ? "reproduced: " : "NOT reproduced: ") + statement + " (" + evidence + ")";
    }
}
