package org.apache.pdfbox.pdmodel.font;

/**
 * Compile-time stand-in for PDFBox's font, used only when PDFBox's jar is not available: ARX's
 * certificate elements name the type, the harness never renders a certificate.
 */
public abstract class PDFont {
}
