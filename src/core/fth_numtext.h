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

#endif
