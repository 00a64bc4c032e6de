package header

// DType is a safetensors element type, spelled exactly as in the header JSON.
// The names are case-sensitive; there is no C128, F128, I4/U4 or F8_E4M3FN.
type DType string

// The 22 dtypes of safetensors 0.8.0-rc.0 (docs/safetensors.md §3), in the
// reference's declaration order. Names were only ever added, so this set also
// reads every file older writers produced.
const (
	BOOL       DType = "BOOL"
	F4         DType = "F4"      // 4 bits: MXFP4 E2M1, two per byte
	F6E2M3     DType = "F6_E2M3" // 6 bits: MXFP6, four per three bytes
	F6E3M2     DType = "F6_E3M2" // 6 bits: MXFP6
	U8         DType = "U8"
	I8         DType = "I8"
	F8E5M2     DType = "F8_E5M2"
	F8E4M3     DType = "F8_E4M3" // torch float8_e4m3fn
	F8E8M0     DType = "F8_E8M0"
	F8E4M3FNUZ DType = "F8_E4M3FNUZ"
	F8E5M2FNUZ DType = "F8_E5M2FNUZ"
	I16        DType = "I16"
	U16        DType = "U16"
	F16        DType = "F16"
	BF16       DType = "BF16"
	I32        DType = "I32"
	U32        DType = "U32"
	F32        DType = "F32"
	C64        DType = "C64" // two F32s
	F64        DType = "F64"
	I64        DType = "I64"
	U64        DType = "U64"
)

// DTypes lists every known dtype in the reference's declaration order.
func DTypes() []DType {
	return []DType{BOOL, F4, F6E2M3, F6E3M2, U8, I8, F8E5M2, F8E4M3, F8E8M0,
		F8E4M3FNUZ, F8E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64}
}

// Bits is the size of one element in bits, and false for an unknown dtype.
// Sizes are in bits because F4 and F6_* are smaller than a byte: a tensor's
// byte length is elements × Bits / 8, and is valid only when that is whole.
func (d DType) Bits() (int, bool) {
	switch d {
	case F4:
		return 4, true
	case F6E2M3, F6E3M2:
		return 6, true
	case BOOL, U8, I8, F8E5M2, F8E4M3, F8E8M0, F8E4M3FNUZ, F8E5M2FNUZ:
		return 8, true
	case I16, U16, F16, BF16:
		return 16, true
	case I32, U32, F32:
		return 32, true
	case C64, F64, I64, U64:
		return 64, true
	}
	return 0, false
}
