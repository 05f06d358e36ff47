package org.apache.hadoop.io;

import java.io.DataInput;
import java.io.DataOutput;
import java.io.IOException;

/**
 * Compile-time stand-in for Hadoop's Writable, used only when Hadoop's jar is not available:
 * Mahout's logistic regression (ARX's classification statistics) implements it, the harness
 * does not use it.
 */
public interface Writable {

    void write(DataOutput out) throws IOException;

    void readFields(DataInput in) throws IOException;
}
