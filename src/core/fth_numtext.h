/* fth_numtext.h: a double's text by fathom.format.util.number's rule: the
 * first of %.15g, %.16g, %.17g that reads back as exactly the same double.
 * fth_numtext writes it without printf or strtod (exact integer arithmetic,
 * see fth_numtext.c); fth_numtext_slow is the rule itself, through snprintf
 * and strtod, kept as the reference the fast writer falls back to outside
 * its range and is tested against. */
#ifndef FTH_NUMTEXT_H
#define FTH_NUMTEXT_H

#define FTH_NUMTEXT_CAP 32 ///< bytes a buffer needs (the longest text is 24 and a NUL)

/// The rule's text of finite x into buf (FTH_NUMTEXT_CAP bytes); returns its
/// length, or 0 (buf holds "") when x is NaN or infinite: each format spells
/// those its own way.
int fth_numtext(char *buf, double x);

/// The decimal digits of v with its sign, as %lld writes them; returns the length.
int fth_numtext_int(char *buf, long long v);

/// The same text through snprintf("%.*g") and strtod (the reference).
int fth_numtext_slow(char *buf, double x);

/* Readable quantities (fathom.units, which calls these): four significant
 * digits and a prefix. */

/// What a readable quantity measures.
typedef enum fth_unit {
  FTH_UNIT_TIME = 0,   ///< seconds: "553.1 ms", "3.2 h", "4.5 days"
  FTH_UNIT_BYTES,      ///< binary prefixes: "1.5 GiB"
  FTH_UNIT_FLOPS,      ///< SI prefixes: "3.2 PFLOP"
  FTH_UNIT_FLOPS_RATE, ///< "3.2 TFLOP/s"
  FTH_UNIT_BANDWIDTH,  ///< "450 GB/s"
  FTH_UNIT_SI,         ///< a bare SI-prefixed count: "1.2 k"
  FTH_UNIT_PERCENT,    ///< a fraction as a percentage: "47.93%"
  FTH_UNIT_KINDS
} fth_unit;

#define FTH_UNIT_TEXT_CAP 320 ///< bytes a buffer for fth_unit_text needs (%.2f of 100 x below DBL_MAX)

/// x in unit `u` as fathom.units writes it (%.4g of x over the largest prefix
/// not above |x|, else the smallest; "nan", "inf" where units.lua says so);
/// returns the length (0 for an unknown unit).
int fth_unit_text(char *buf, fth_unit u, double x);

#endif
