// The `.stitch` text format reader (see DESIGN.md, "Graph text format", the contract).
//
//   file      := { graph }+                      (at least one graph; names unique in the file)
//   graph     := 'graph' NAME '(' [param {',' param}] ')' '{' NL {stmt NL} ret NL '}' (NL | EOF)
//   param     := NAME ':' type
//   type      := DTYPE '[' [dim {',' dim}] ']'   dim := INT >= 0 | SYMBOL;  `f32[]` is a scalar
//   stmt      := NAME '=' OP '(' [arg {',' arg}] ')'
//   arg       := NAME | NUMBER | KEY '=' attr     (positional args first, then key=value)
//   attr      := NUMBER | 'true' | 'false' | DTYPE | IDENT | '[' [elem {',' elem}] ']'
//   ret       := 'return' NAME {',' NAME}
//
// Decisions where DESIGN.md is silent:
// - `#` comments run to the end of the line. Blank and comment lines may appear anywhere. Inside
//   (), [] newlines are ignored, so signatures and argument lists may span lines; a newline may
//   also come between the header's ')' and its '{'. No trailing commas.
// - Numbers: integers, decimals (`2.`, `.5`), exponents (`1e-5`, `1E+3`), `inf`, `nan`, and a
//   leading `-` on any of them (`-1`, `-inf`). An integer that fits int64 is an Int attribute,
//   otherwise a Float. A literal whose value overflows or underflows a double ("1e999", "1e-400")
//   is an error ("number out of range") rather than a silent inf or 0. Where an attribute's schema
//   wants a number, the literal's exact double is used (so `-0` stays -0.0).
// - A list attribute of integers only is Ints; one with any identifier is a Shape (Dims), ints as
//   static dims; `[]` is an empty Ints. The builder converts between the two where the schema asks.
// - A number literal may be a positional operand only of a binary op or of select's 2nd or 3rd
//   operand; it becomes a scalar Constant of the other value operand's dtype, added just before
//   the op (one Constant per use). Literals cannot stand for bool operands.
// - `return` must be the last statement; the `}` closes on a line of its own.
// - Every problem, including type, shape and attribute errors found by GraphBuilder, is thrown as
//   stitch::Error(ErrorCode::Parse) with the message "FILE:LINE:COL: error: MESSAGE". Inference
//   errors point at the operand or `key=` they are about, else at the op name; other builder
//   errors at the statement's name. Columns count bytes.
// - The parser is a loop over tokens with no recursion, so no input can exhaust the stack.
#pragma once

#include <string_view>
#include <vector>

#include "ir/graph.h"
#include "runtime/support/error.h"

namespace stitch::ir {

// Parses one or more graphs; nodes carry the SourceLoc of their statement's name.
std::vector<Graph> parseModule(std::string_view text, std::string_view filename);

}  // namespace stitch::ir
